"""The API console at `/docs` and the favicon, served from the package.

FastAPI's own /docs loads Swagger UI from a public CDN: blank offline, and every visit is told
to a third party. Here the page loads Swagger UI from static/swagger-ui/ (vendored, with its
licence: see the README there), never asks the public validator (`validatorUrl: null`), and uses
the package's own favicon. FastAPI's /redoc (also from a CDN) is off.
"""
from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse

from .public import STATIC

router = APIRouter(include_in_schema=False)
ASSETS = "/static/swagger-ui"
FAVICON = "/static/favicon.svg"


@router.get("/docs")
async def docs() -> HTMLResponse:
    from fastapi.openapi.docs import get_swagger_ui_html

    return get_swagger_ui_html(openapi_url="/openapi.json", title="PAGE-RAG API", swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                               swagger_css_url=f"{ASSETS}/swagger-ui.css", swagger_favicon_url=FAVICON,
                               swagger_ui_parameters={"validatorUrl": None, "deepLinking": True})


@router.get("/favicon.ico")
async def favicon() -> FileResponse:
    """Browsers ask for /favicon.ico whatever the page says; the same picture as the page's icon."""
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})
