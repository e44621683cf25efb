"""Ordering declared by passes (``runs_after``/``runs_before``) and checked by the pass manager."""

from __future__ import annotations

import re

import attrs
import pytest

from passes import Pass, PassManager, PipelineError, check_order, function_pass, parse_pipeline


@attrs.frozen
class MakesThings(Pass):
    """Makes things."""

    name = "test-order-makes"

    def run(self, graph) -> bool:
        return False


@attrs.frozen
class ReadsThings(Pass):
    """Reads what test-order-makes made."""

    name = "test-order-reads"
    runs_after = ("test-order-makes",)

    def run(self, graph) -> bool:
        return False


@function_pass("test-order-early", runs_before=("test-order-makes",))
def early(graph) -> bool:
    """Runs before test-order-makes."""
    return False


def test_text_that_breaks_an_order_fails_naming_both_passes():
    with pytest.raises(
        PipelineError,
        match=re.escape(
            "test-order-reads must run after test-order-makes (pipeline positions 1 and 3; "
            "declared by test-order-reads.runs_after)"
        ),
    ):
        PassManager("test-order-reads,remove-no-ops,test-order-makes")


def test_runs_before_of_a_function_pass():
    with pytest.raises(
        PipelineError,
        match=re.escape(
            "test-order-makes must run after test-order-early (pipeline positions 1 and 2; "
            "declared by test-order-early.runs_before)"
        ),
    ):
        PassManager("test-order-makes,test-order-early")
    PassManager("test-order-early,test-order-makes,test-order-reads")


def test_a_constraint_on_an_absent_pass_holds():
    PassManager("test-order-reads,remove-no-ops")
    PassManager("remove-no-ops,test-order-makes")


def test_a_repeated_pass_keeps_an_order_with_one_run_after():
    check_order(parse_pipeline("test-order-reads,test-order-makes,test-order-reads"))
    with pytest.raises(PipelineError, match=r"positions 2 and 3"):
        check_order(parse_pipeline("test-order-reads,test-order-reads,test-order-makes,test-order-makes"))


def test_add_refuses_a_pass_that_breaks_an_order_and_keeps_the_pipeline():
    manager = PassManager("test-order-reads")
    with pytest.raises(PipelineError, match="test-order-reads must run after test-order-makes"):
        manager.add("test-order-makes")
    assert manager.pipeline_text == "test-order-reads"
    PassManager("test-order-makes").add(ReadsThings())
