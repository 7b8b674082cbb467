"""fa3conform's Python side: the call recorder and the device runner.

- ``python -m fa3conform.record --out DIR -- COMMAND...`` records the ``flash_attn_with_kvcache``
  calls of every Python process COMMAND starts (``fa3conform.record.install(path)`` inside one
  process);
- ``python -m fa3conform.run --target T --bundles DIR`` runs case bundles written by
  ``fa3conform export`` through a real stack, one case at a time in a worker process;
- ``fa3conform.entry_points.wrap_entry_points(on_call)`` is the wrapping both rest on.

Only the standard library is needed, except by the runner's array backends (torch or NumPy, and
the stack under test).
"""
