"""The ExecuTorch boundary of the backend: the only folder of ``lowering/`` whose modules read or
write torch.fx graphs and ExecuTorch objects (and import ExecuTorch at their top).

* ``partitioner``: ``XnnpackPartitioner``, ExecuTorch's Partitioner deciding in the IR;
* ``rewrite_pass``: xir's rewrites as an ExecuTorch ExportedProgram pass;
* ``lower``: ``to_edge_transform_and_lower`` with xir's rewrites;
* ``tags``: the partition plan written into the FX graph as delegation tags;
* ``writeback``: the IR's rewrites written into a copy of the edge program;
* ``linear_rebuild``, ``backend_passes``: what XNNPACK's own preprocessing will do to a delegate;
* ``xnnpack_ops``: the torch ops and XNNPACK serialization of the backend's own ops
  (``lowering.ops`` defines them in the IR);
* ``xir_ops_as_aten``: the backend's ops no delegate took, written back as ATen;
* ``recipes``, ``quantizer``, ``llm``: ExecuTorch's export-recipe API, its XNNPACK quantizer, its
  LLM export flow, with xir's partitioner.

The rest of ``lowering/`` (capability, partition, pipeline, passes, rules, ops) is pure IR: it
imports neither torch.fx nor ExecuTorch (``tests/test_rooms.py``). The core's own import from
torch.export (``xir.fx_import``) reads any ExportedProgram and needs no ExecuTorch.
"""
