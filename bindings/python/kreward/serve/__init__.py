"""`kreward serve`: the pool behind HTTP, for trainers whose reward code
runs where no GPU is (docs/serve.md). Needs starlette and uvicorn."""
from .server import Options, Server

__all__ = ["Options", "Server"]
