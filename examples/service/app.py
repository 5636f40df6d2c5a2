"""A small web service over one Luma program: loaded once at start-up, its agent served on
POST /triage, many requests at once.

    uvicorn app:app --app-dir examples/service

The program runs on the offline model; give the agent a real model (and its API key in the
environment) to serve real answers. A tenant's own credentials could be passed per request
with ``env=`` instead of the process environment.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pydantic
from fastapi import FastAPI, HTTPException, Request

import luma

HERE = Path(__file__).parent


class TriageRequest(pydantic.BaseModel):
    text: str
    request_id: str


class Result(pydantic.BaseModel):
    ticket: str
    team: str
    words: int
    urgent: bool


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # compile, load the tool module, open the stores: once, before the first request
    async with luma.load(HERE / "triage.luma",
                         tool_modules=[HERE / "triage_tools.py"]) as program:
        app.state.program = program
        yield


app = FastAPI(lifespan=lifespan)


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/triage")
async def triage(body: TriageRequest, request: Request) -> Result:
    program: luma.Program = request.app.state.program
    try:
        return await program.run("Desk", text=body.text, request_id=body.request_id,
                                 output_type=Result)
    except luma.RunError as err:
        status = 422 if err.code == "ARGUMENT_INVALID" else 502
        raise HTTPException(status, detail={"code": err.code, "message": err.message,
                                            "retryable": err.retryable}) from None
