"""GET /metrics: this process's metrics in the Prometheus text format."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from respond.api._common import tenant_of
from respond.metrics import Metrics

router = APIRouter()


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    if request.app.state.metrics_auth:
        tenant_of(request)  # 401 without a valid key, as on /v1
    registry: Metrics = request.app.state.metrics
    return Response(generate_latest(registry.registry), media_type=CONTENT_TYPE_LATEST)
