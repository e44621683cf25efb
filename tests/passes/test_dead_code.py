"""dead-code-elimination erases unread symbolic-size arithmetic (torch.export's ``_operator.mul``
and the like), which a view written with -1 leaves behind; other opaque ops stay."""

from passes import PassManager
from xir import parse_graph, print_graph

TEXT = """graph @g {
  input %x: f32[s0,s1,4]
  %a: int = aten.sym_size.int(%x) {dim=0}
  %b: int = aten.sym_size.int(%x) {dim=1}
  %m: int = _operator.mul(%a, %b)
  %k: int = _operator.add(%a, %b)
  %y: f32[s0*s1,4] = aten.view_copy(%x) {size=[-1, 4]}
  %z: f32[1] = some.opaque_call(%y) {n=%k}
  return %y, %z
}
"""


def test_unread_size_arithmetic_is_erased_and_a_read_one_kept():
    graph = parse_graph(TEXT)
    PassManager("dead-code-elimination").run(graph)
    text = print_graph(graph)
    assert "_operator.mul" not in text  # unread
    assert "_operator.add" in text and "some.opaque_call" in text  # read by an opaque op, which stays
    assert text.count("aten.sym_size.int") == 2  # both read by the add
