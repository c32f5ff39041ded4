"""Tracing from the standard OpenTelemetry environment, in every command.

With `OTEL_TRACES_EXPORTER` (`otlp`, `console`, `none`; a comma-separated list) or an OTLP endpoint
(`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, the command installs an
OpenTelemetry SDK tracer provider globally before it starts, exporting in batches; every other
`OTEL_*` variable (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`,
`OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`, ...) means what the SDK says. OTLP goes over HTTP/protobuf
(`OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`, the default; `grpc` if that exporter is installed).
Without a service name the command names itself: `aun-runtime-worker`, `aun-runtime-host`, ...
`OTEL_SDK_DISABLED=true` turns it all off. It needs the `otel` extra
(`pip install 'aun-runtime[otel]'`); asked for without it, the command says so and exits 2.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["FLUSH_TIMEOUT", "TRACES_EXTRA", "Tracing", "tracing_from_environment"]

#: What to install for `OTEL_*` tracing.
TRACES_EXTRA = "pip install 'aun-runtime[otel]'"
#: Seconds the spans still in the batch get to leave as the command ends.
FLUSH_TIMEOUT = 5.0


def _wanted(env: Mapping[str, str]) -> list[str]:
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = env.get("OTEL_TRACES_EXPORTER")
    if names is None:
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return ["otlp"] if endpoint else []
    return [name.strip() for name in names.split(",") if name.strip() and name.strip() != "none"]


def _exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise SystemExit(f"error: OTEL_TRACES_EXPORTER={name!r}: this command exports otlp, console or none")
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    try:
        if protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        elif protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # type: ignore[no-redef,import-not-found,unused-ignore]
        else:
            raise SystemExit(f"error: OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: use http/protobuf (or grpc)")
    except ImportError:
        extra = TRACES_EXTRA if protocol == "http/protobuf" else "pip install opentelemetry-exporter-otlp-proto-grpc"
        raise SystemExit(f"error: the OTEL_* environment asks for OTLP traces ({protocol}): {extra}") from None
    return OTLPSpanExporter()


class Tracing:
    """The tracer provider a command installed; `close` exports what is left."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider

    def close(self) -> None:
        self.provider.force_flush(timeout_millis=int(FLUSH_TIMEOUT * 1000))
        self.provider.shutdown()


def tracing_from_environment(command: str, environ: Mapping[str, str] | None = None) -> Tracing | None:
    """Install an SDK tracer provider as the `OTEL_*` environment asks, or nothing (None).

    Raises:
        SystemExit: the environment asks for what cannot be done (the message says what to do).
    """
    env = os.environ if environ is None else environ
    wanted = _wanted(env)
    if not wanted:
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise SystemExit(f"error: the OTEL_* environment asks for traces: {TRACES_EXTRA}") from None
    exporters = [_exporter(name, env) for name in wanted]
    named = {} if env.get("OTEL_SERVICE_NAME") or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "") else {
        "service.name": f"aun-runtime-{command}"
    }
    provider = TracerProvider(resource=Resource.create(named))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return Tracing(provider)
