"""`pagerag serve` and `pagerag mcp`: the repositories behind a web page, a JSON API, an
OpenAI-compatible chat endpoint and MCP tools.

    config.py      what is served and how (address, API key, build root, limits)
    pins.py        pinned (hard-linked) copies of repository versions
    registry.py    the served repositories, one version each, swapped atomically on rebuild
    app.py         the FastAPI application; guard.py the checks every request passes;
                   errors.py the JSON error bodies
    routes.py      ask, retrieve, repositories, cited passages, the page
    chat.py        OpenAI-compatible /v1/models and /v1/chat/completions
    builds.py      build jobs and their progress as server-sent events; build_worker.py runs one
    mcp_server.py  the MCP tools over stdio
    docs.py        the API console at /docs (Swagger UI from static/swagger-ui/, no CDN) and the favicon
    inputs.py      request text checked before the library sees it; public.py what clients see
                   of the server's files (names, never paths)
    jobs.py        the build queue: bounded, cancellable, cleaned up
    conversation.py  a chat's last question made standalone from the earlier turns
    listen.py      the listening socket, bound before anything is loaded
    static/        the web page, its favicon and the vendored Swagger UI (shipped in the wheel)

From the library only the public API is used (pagerag.api, build, repository, settings, errors,
the answer records), plus pagerag.offline for token counts and the cache directory.
"""
