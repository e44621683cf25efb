"""The XNNPACK backend's passes, one per file, each named ``xnnpack.*``: rewrites that work around
what XNNPACK or ExecuTorch 1.5.1 cannot define or gets wrong, or that let XNNPACK run more of the
program. None registers on import: ``pyproject.toml`` lists them by name (entry points
``xir.passes``), and a pipeline imports a pass's module when it names the pass.
"""
