"""A real Prometheus server (Debian's, installed by scripts/install-test-deps.sh) scrapes a worker
and its host on loopback; queries through its HTTP API return our series with the counts the
traffic made: one model call answered, its tokens, the question and the answer sent, one worker."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
from pathlib import Path

from tests.models.openai_stand_in import openai_stand_in

from .processes import DIE_WITH_PARENT, ROOT, Process, start_host, start_worker, wait_until
from .test_operating_cli import MODEL, free_port, get, probes_url

PROMETHEUS = os.environ.get("AUN_PROMETHEUS", "/usr/bin/prometheus")


def test_prometheus_scrapes_a_worker_and_its_host(procs: list[Process], tmp_path: Path) -> None:
    assert os.access(PROMETHEUS, os.X_OK), f"{PROMETHEUS} is missing: run scripts/install-test-deps.sh"
    with openai_stand_in(lambda request: "__REPLY__ It is up.") as model:
        host, address = start_host(extra=["--http", "127.0.0.1:0"])
        procs.append(host)
        worker = start_worker(address, "tests.distributed.operating_apps:model_team", tmp_path / "w.sqlite", env={
            "PYTHONPATH": str(ROOT), "AUN_HTTP": "127.0.0.1:0", "AUN_MODEL": MODEL,
            "AUN_MODEL_BASE_URL": model.base_url, "AUN_MODEL_API_KEY": "test",
        })
        procs.append(worker)
        targets = [probes_url(process).removeprefix("http://") for process in (worker, host)]
        config = tmp_path / "prometheus.yml"
        config.write_text(json.dumps({  # YAML is a superset of JSON
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": "aun", "static_configs": [{"targets": targets}]}],
        }))
        listen = f"127.0.0.1:{free_port()}"
        server = subprocess.Popen(
            [*DIE_WITH_PARENT, PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address={listen}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            def query(promql: str) -> dict[str, float]:
                try:
                    status, body = get(f"http://{listen}/api/v1/query?query={urllib.parse.quote(promql)}")
                except OSError:  # not listening yet
                    return {}
                if status != 200:
                    return {}
                return {
                    json.dumps(item["metric"], sort_keys=True): float(item["value"][1])
                    for item in json.loads(body)["data"]["result"]
                }

            def scraped() -> bool:  # both targets scraped since the model answered
                return (list(query(f'aun_model_calls_total{{model="{MODEL}",outcome="ok"}}').values()) == [1.0]
                        and list(query('up{job="aun"}').values()) == [1.0, 1.0])

            wait_until(scraped, timeout=90, what="Prometheus to scrape both, after the model call")
            assert query(f'sum by (direction) (aun_model_tokens_total{{model="{MODEL}"}})') == {
                '{"direction": "input"}': 7.0, '{"direction": "output"}': 3.0
            }
            assert list(query("aun_sends_total").values()) == [2.0]
            assert list(query("aun_host_workers").values()) == [1.0]
        finally:
            server.kill()
            server.wait(timeout=10)
