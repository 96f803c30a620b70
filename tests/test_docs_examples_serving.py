"""The LLM serving and deployment pages' examples run (test_docs_examples.py's rules;
split off so that the two halves can run on two workers)."""

from __future__ import annotations

import pytest

from test_docs_examples import SERVING_PAGES, page_cases, run_example

SERVING_CASES = page_cases(serving=True)


@pytest.mark.parametrize("block", SERVING_CASES, ids=[b.name for b in SERVING_CASES])
def test_the_serving_example_runs(block, tmp_path):
    run_example(block, tmp_path)


def test_the_serving_pages_have_examples():
    """Each page named as a serving page still has cases here (a renamed page would
    otherwise drop out of both files silently)."""
    assert {block.page.name for block in SERVING_CASES} == SERVING_PAGES
