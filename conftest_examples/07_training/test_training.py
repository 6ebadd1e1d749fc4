"""Guards for a training step: its forward and backward ops, the optimizer's update, no
scalar reads in the loop.

    pytest --opprof conftest_examples/07_training
"""

from conftest import accumulated_step, train_step


def test_train_step(opprof, trainer):
    model, opt, x, y = trainer
    # warmup >= 1: the first call creates the optimizer's state (momentum buffers), outside
    # the measured steps
    opprof.run(train_step, model, opt, x, y, warmup=3, steps=10)
    opprof.assert_op_count("aten::addmm", 2)  # forward: two Linear layers
    opprof.assert_op_count("AddmmBackward0", 2)  # backward: their gradient nodes
    opprof.assert_op_count("aten::_foreach_add_", min=1)  # SGD's update, for all parameters at once
    opprof.assert_range_below("Optimizer.step#SGD.step", ms=50)  # the update, per step
    opprof.assert_no_op("aten::item")  # no loss.item() logging inside the measured step


def test_accumulated_step(opprof, trainer):
    """Four micro-batches and one update per call: every step does the same work, so the
    optimizer's ops are in every step (an update every 4th call would be in some only)."""
    model, opt, x, y = trainer
    batches = [(x[i::4], y[i::4]) for i in range(4)]
    opprof.run(accumulated_step, model, opt, batches, warmup=3, steps=10)
    opprof.assert_op_count("aten::addmm", 8)  # 4 micro-batches x 2 layers
    opprof.assert_range_below("Optimizer.step#SGD.step", ms=50)
