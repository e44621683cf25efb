"""xir's tools: the ``xir`` command (:mod:`xir_tools.cli`), its progress lines, the demo models
(:mod:`xir_tools.examples`), the harness that exports, lowers with xir or stock, runs on
ExecuTorch's runtime and compares with eager (:mod:`xir_tools.harness`, shared by the command,
the fuzzer, the benchmarks and the tests),
the checked ``.pt2`` loader (:mod:`xir_tools.pt2`), the partition as an HTML page
(:mod:`xir_tools.html_report`), the Model Explorer adapter (:mod:`xir_tools.explorer`) and the
differential fuzzer (:mod:`xir_tools.fuzz`).

The tools know every layer below them (``xir``, ``passes``, ``lowering``); nothing below imports
them (``tests/test_layers.py`` checks it).
"""
