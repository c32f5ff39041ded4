"""Reusable agents built on aun_runtime, and the demo application."""
