"""Start-up hook of ``python -m fa3conform.record``: the launcher puts this folder first on
``PYTHONPATH``, so every Python process of the recorded command runs it at start-up.

It first runs the ``sitecustomize`` it shadows (a distribution's or a virtual environment's), then
starts recording if the launcher's folder is set. It never stops a process from starting.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _run_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _start_recording():
    try:
        from fa3conform.record import install_from_environment
        install_from_environment()
    except Exception as exc:  # recording must never break the program
        print(f"fa3conform.record: not recording in pid {os.getpid()}: {exc!r}", file=sys.stderr)


_run_shadowed_sitecustomize()
_start_recording()
