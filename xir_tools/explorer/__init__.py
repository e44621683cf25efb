"""xir in Google's Model Explorer (``pip install 'xir[explorer]'``):

    model-explorer model.pt2 --extensions=xir_tools.explorer

Model Explorer imports :mod:`xir_tools.explorer.main`, the adapter (it needs Model Explorer, which
imports torch). :mod:`xir_tools.explorer.data` builds the graph JSON and the node data from
:func:`xir_tools.html_report.report_data` and needs neither.
"""

from .data import graph_id, graph_json, namespace, node_data, write_node_data

__all__ = ["graph_id", "graph_json", "namespace", "node_data", "write_node_data"]
