"""Tests that know nothing of the rules their folder's conftest.py gives them.

pytest --opprof conftest_examples/03_rules_and_keys
OPPROF_RUNNER=ci-large pytest --opprof conftest_examples   # baselines under <key>-ci-large
"""

from conftest import infer


def test_conv_block(opprof, conv):
    model, x = conv
    opprof.run(infer, model, x, warmup=3, steps=10)
    opprof.assert_op_count("aten::conv2d", 1)
    opprof.assert_op_count("aten::relu", 1)


def test_the_folder_rule_is_on_every_test(opprof, conv, request):
    """The folder's marker is on this test although the test does not mention it."""
    model, x = conv
    opprof.run(infer, model, x, warmup=3, steps=10)
    assert request.node.get_closest_marker("opprof").kwargs["tolerance"] == "50%"
