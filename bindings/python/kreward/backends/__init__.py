"""Backends: implementations of the Evaluator protocol (base.py), picked by
kreward.backend.resolve(): local.py (Evaluator), http.py (Client), ray.py
(RayPool, needs ray). Import the one you need; this package imports none
of them (ray is optional)."""
from .base import Backend, is_backend

__all__ = ["Backend", "is_backend"]
