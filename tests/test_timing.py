"""book.timing: seconds measured one way (torch.utils.benchmark), and the counts the chapters' laws rest on."""
import pytest
import torch

from book.attention import scaled_dot_product_attention
from book.timing import count_calls, count_flops, time_in_turns, time_it


def test_time_it_gives_the_median_seconds_of_one_call_and_restores_the_threads():
    threads = torch.get_num_threads()
    calls = []
    x = torch.randn(64, 64)
    s = time_it(lambda: calls.append(x @ x), min_run_time=0.01)
    assert 0 < s < 0.1 and len(calls) > 1            # warmed up and run several times
    assert torch.get_num_threads() == threads


def test_time_in_turns_measures_each_function_in_every_round():
    order = []
    seconds = time_in_turns([lambda: order.append("f"), lambda: order.append("g")], min_run_time=0.01, rounds=3)
    assert len(seconds) == 2 and all(s > 0 for s in seconds)
    switches = sum(a != b for a, b in zip(order, order[1:]))
    assert switches >= 5                               # f's, then g's, three rounds: they took turns


def test_a_slower_function_reads_slower():
    x = torch.randn(200, 200)
    small, big = time_in_turns([lambda: x[:20, :20] @ x[:20, :20], lambda: x @ x @ x], min_run_time=0.03)
    assert big > small


def test_count_flops_counts_a_matrix_product_as_two_per_multiply_add():
    a, b = torch.randn(3, 5), torch.randn(5, 7)
    assert count_flops(lambda: a @ b) == 2 * 3 * 5 * 7
    assert count_flops(lambda: a + 1) == 0             # elementwise work is not counted


@pytest.mark.parametrize("T", [64, 512])
def test_attention_flops_quadruple_when_the_length_doubles(T):
    def flops(n):
        q = torch.randn(1, 1, n, 16)
        return count_flops(lambda: scaled_dot_product_attention(q, q, q))
    assert flops(2 * T) == 4 * flops(T)                # scores and weighted values: T x T each


def test_count_calls_counts_the_steps_of_a_loop_and_not_of_one_product():
    rnn, x = torch.nn.RNN(8, 8, batch_first=True), torch.randn(1, 10, 8)
    assert count_calls(lambda: rnn(x), "mm", "addmm") == 1 + 10      # all inputs at once, then one per step
    w = torch.randn(8, 8)
    assert count_calls(lambda: x @ w, "mm", "addmm", "bmm") == 1


@pytest.mark.parametrize("call, message", [
    (lambda: time_it(3), "must be a function"),
    (lambda: time_it(lambda: None, threads=0), "threads must be a positive int"),
    (lambda: time_it(lambda: None, min_run_time=0), "min_run_time must be a number > 0"),
    (lambda: time_in_turns([]), "non-empty list of functions"),
    (lambda: time_in_turns([lambda: None, 2]), r"fns\[1\] must be a function"),
    (lambda: time_in_turns([lambda: None], rounds=0), "rounds must be a positive int"),
    (lambda: count_flops(None), "must be a function"),
    (lambda: count_calls(lambda: None), "at least one ATen operation"),
])
def test_bad_arguments_say_what_was_expected(call, message):
    with pytest.raises((TypeError, ValueError), match=message):
        call()


def test_count_positions_counts_what_generation_runs_with_and_without_a_cache():
    from book.generate import generate
    from book.gpt import GPT, GPTConfig
    from book.timing import count_positions

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, context_len=32, d_model=16, n_heads=2, n_layers=1)).eval()
    prompt, n = torch.zeros(1, 4, dtype=torch.long), 6
    full = count_positions(model, lambda: generate(model, prompt, n, temperature=0, use_cache=False))
    cached = count_positions(model, lambda: generate(model, prompt, n, temperature=0, use_cache=True))
    assert full == sum(4 + t for t in range(n)) and cached == 4 + n - 1
    with pytest.raises(ValueError, match="token ids"):
        count_positions(model, lambda: model(torch.tensor(3)))
    with pytest.raises(TypeError, match="torch.nn.Module"):
        count_positions(lambda: None, lambda: None)


def test_count_flops_sees_the_fused_attention_kernel_as_its_reference_products():
    q = torch.randn(1, 2, 32, 8)
    fused = count_flops(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True))
    assert fused == count_flops(lambda: scaled_dot_product_attention(q, q, q)) == 2 * (2 * 2 * 32 * 32 * 8)


def test_a_slow_function_is_called_once_to_warm_up_and_once_a_round():
    import time

    calls = []
    (s,) = time_in_turns([lambda: calls.append(time.sleep(0.02))], min_run_time=0.01, rounds=3)
    assert len(calls) == 1 + 3 and s >= 0.02
