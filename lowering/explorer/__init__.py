"""xir in Google's Model Explorer (``pip install 'xir[explorer]'``):

    model-explorer model.pt2 --extensions=lowering.explorer

Model Explorer imports :mod:`lowering.explorer.main`, the adapter (it needs Model Explorer, which
imports torch). :mod:`lowering.explorer.data` builds the graph JSON and the node data from
:func:`lowering.html_report.report_data` and needs neither.
"""

from .data import graph_id, graph_json, namespace, node_data, write_node_data

__all__ = ["graph_id", "graph_json", "namespace", "node_data", "write_node_data"]
