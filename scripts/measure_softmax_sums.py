"""How far from 1 do the rows of real softmax outputs sum? The data behind ``sum_tolerance``.

For each vocabulary size and producer (torch.softmax in float32, bfloat16 and float16, and float32
results cast down), prints the worst |sum - 1| (the sum taken in float64, as the validation does)
over two families of logits, next to ``multidraft._validation.sum_tolerance``:

- random: ``--cases`` rows of scale * (Gaussian or Student-t(3) noise), scales 0.1 to 30 (the
  scale plays the role of 1 / temperature: flat to peaked);
- tail: the worst row of a sweep over c of one logit 0 and V - 1 logits c, i.e. one token near 1
  and a tail of entries near the float32 roundoff, which the normaliser's additions lose.

    python scripts/measure_softmax_sums.py [--cases 300] [--vocabularies 32000 128000 152064]

Set ``ATEN_CPU_CAPABILITY=avx2`` (or ``default``) to measure torch's other CPU kernels.
"""
import argparse

import numpy as np
import torch

from multidraft._validation import sum_tolerance

SCALES = (0.1, 1.0, 3.0, 10.0, 30.0)
TAIL_LOGITS = np.arange(-19.0, -12.0, 0.1)

PRODUCERS = {
    "float32 softmax": lambda x: torch.softmax(x, -1),
    "bfloat16 softmax": lambda x: torch.softmax(x.bfloat16(), -1),
    "float32 softmax -> bfloat16": lambda x: torch.softmax(x, -1).bfloat16(),
    "float16 softmax": lambda x: torch.softmax(x.half(), -1),
    "float32 softmax -> float16": lambda x: torch.softmax(x, -1).half(),
}


def random_logits(generator: torch.Generator, cases: int, V: int) -> torch.Tensor:
    """(cases, V) float32: half Gaussian, half heavy-tailed (Student-t with 3 degrees of freedom)."""
    scale = torch.tensor(SCALES)[torch.arange(cases) % len(SCALES)][:, None]
    noise = torch.randn(cases, V, generator=generator)
    chi2 = torch.randn(3, cases, V, generator=generator).square().sum(0)
    noise[1::2] = (noise / torch.sqrt(chi2 / 3))[1::2]
    return scale * noise


def tail_logits(V: int) -> torch.Tensor:
    """(len(TAIL_LOGITS), V) float32: one logit 0 (at V // 3) and V - 1 logits c per row."""
    x = torch.tensor(TAIL_LOGITS, dtype=torch.float32)[:, None].repeat(1, V)
    x[:, V // 3] = 0.0
    return x


def worst_error(rows: torch.Tensor, produce) -> float:
    """Worst |sum - 1| over the rows, one softmax call per row as in decoding."""
    return max(abs(produce(row[None])[0].double().sum().item() - 1.0) for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--vocabularies", type=int, nargs="+", default=[32000, 128000, 152064])
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, CPU kernels {torch.backends.cpu.get_cpu_capability()}")
    print(f"{'V':>7} {'producer':<28} {'random':>9} {'tail':>9} {'tolerance':>9}")
    for V in args.vocabularies:
        random, tail = random_logits(generator, args.cases, V), tail_logits(V)
        for name, produce in PRODUCERS.items():
            tolerance = sum_tolerance(produce(tail[:1]).dtype, V)
            print(f"{V:>7} {name:<28} {worst_error(random, produce):9.2e} {worst_error(tail, produce):9.2e} "
                  f"{tolerance:9.2e}")


if __name__ == "__main__":
    main()
