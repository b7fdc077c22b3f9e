"""Shared instances (fixed seeds) and helpers. p = TARGET, q = DRAFT ([GR] notation).

Instances are module-level lists so that tests can parametrize over them; each ``Case`` caches
its oracle results, so the LP and the brute force run once per instance for the whole session.
"""
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

import oracle
from multidraft.vllm._options import vllm_version

# The vLLM plugin's engine tests need vLLM, which has an environment of its own (make vllm-env runs
# them there). Asked by distribution: tests/vllm itself is importable as a namespace package "vllm".
collect_ignore = [] if vllm_version() else ["vllm/test_engine.py", "vllm/test_sampler.py"]

TOL = 1e-9
METHODS = ("maxflow", "maxflow_cs", "lp")
# (method, extra solve_otlp keywords): every exact plan the package offers
PLAN_METHODS = [("maxflow", {}), ("maxflow", {"network": "tuples"}), ("maxflow_cs", {}), ("lp", {})]


def plan_id(plan_method):
    method, extra = plan_method
    return "-".join([method, *extra.values()])


@dataclass(eq=False)
class Case:
    """One instance. ``q`` is (V,) for schemes iid / without_replacement and (n, V) for independent.

    ``p`` and ``q`` are passed to the package as stored (they may be float32 or strided views);
    the oracle sees their rows normalised in float64, the law every entry point samples.
    """

    name: str
    p: np.ndarray
    q: np.ndarray
    n: int
    scheme: str = "iid"
    tags: frozenset = field(default_factory=frozenset)

    def __repr__(self):
        return self.name

    @property
    def V(self):
        return self.p.shape[-1]

    @cached_property
    def p64(self):
        return normalised(np.array(self.p, dtype=np.float64))

    @cached_property
    def q64(self):
        return normalised(np.array(self.q, dtype=np.float64))

    @cached_property
    def law(self):
        """(tuples, probs) over all V**n tuples, from the oracle's own enumeration."""
        return oracle.draft_law(self.scheme, self.q64, self.n)

    @cached_property
    def support(self):
        """(tuples, probs) restricted to tuples with positive probability."""
        tuples, probs = self.law
        keep = probs > 0
        return tuples[keep], probs[keep]

    @cached_property
    def brute(self):
        """(alpha*, min psi, smallest minimiser, ambiguous) by brute force over subsets."""
        return oracle.brute_force_subset(self.p64, *self.law)

    @cached_property
    def lp(self):
        """(alpha*, C) from the full OTLP solved by HiGHS."""
        return oracle.otlp_lp(self.p64, *self.law)

    def psi(self, H):
        return oracle.psi(self.p64, *self.law, H)

    def with_scheme(self, scheme):
        return Case(f"{self.name}-{scheme}", self.p, self.q, self.n, scheme, self.tags)

    def optimum_args(self):
        """(args, kwargs) for md.optimal_acceptance / md.optimal_subset."""
        if self.scheme == "independent":
            return (self.p, self.q), {}
        return (self.p, self.q, self.n), {"scheme": self.scheme}

    def solve(self, plan_method):
        """md.solve_otlp on this instance with one of PLAN_METHODS = (method, extra keywords)."""
        import multidraft as md
        method, extra = plan_method
        args, kwargs = self.solve_args()
        return md.solve_otlp(*args, method=method, **extra, **kwargs)

    def solve_args(self):
        """(args, kwargs) for md.solve_otlp / md.GlobalResolution."""
        if self.scheme == "independent":
            return (self.p, self.q), {"scheme": "independent"}
        return (self.p, self.q, self.n), {"scheme": self.scheme}


def case_id(case):
    return case.name


# ----------------------------------------------------------------------------- generators

def dirichlet(rng, V, concentration, size=None):
    return rng.dirichlet(np.full(V, concentration), size=size)


def normalised(x):
    x = np.asarray(x, dtype=np.float64)
    return x / x.sum(axis=-1, keepdims=True)  # row by row, as the package does


def random_cases(count, seed=2024):
    """Dirichlet p and q, concentration alternating 0.3 (peaked) / 5.0 (flat), V in 2..6, n in 1..3."""
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(count):
        conc = (0.3, 5.0)[k % 2]
        V, n = int(rng.integers(2, 7)), int(rng.integers(1, 4))
        cases.append(Case(f"rand{k}-V{V}-n{n}-c{conc}", dirichlet(rng, V, conc), dirichlet(rng, V, conc), n,
                          tags=frozenset({"random"})))
    return cases


def strided(x):
    """A non-contiguous view holding the values of x."""
    buf = np.zeros(2 * len(x))
    buf[::2] = x
    return buf[::2]


def dyadic_float32(x, bits=20):
    """float32 values on the grid 2**-bits that sum to exactly 1 (so float32 input is a valid law)."""
    k = np.round(np.asarray(x) * 2**bits)
    k[np.argmax(k)] += 2**bits - k.sum()
    return (k / 2**bits).astype(np.float32)


def adversarial_pairs(seed=7):
    """(name, p, q, tags) for the edge cases; every one is run with n = 1, 2, 3."""
    rng = np.random.default_rng(seed)
    r5, s5 = dirichlet(rng, 5, 1.0), dirichlet(rng, 5, 1.0)
    zp, zq = r5.copy(), s5.copy()
    zp[[0, 2]] = 0.0
    zq[[1, 4]] = 0.0
    short = r5.copy()
    short[np.argmax(short)] -= 1e-12  # sums to 1 - 1e-12: accepted (float64 tolerance 1e-6), normalised
    pairs = [
        ("zeros_p", normalised(zp), s5, set()),
        ("zeros_q", r5, normalised(zq), set()),
        ("zeros_both", normalised(zp), normalised(zq), set()),
        ("common_zero", normalised([0.2, 0.0, 0.5, 0.3]), normalised([0.6, 0.0, 0.1, 0.3]), set()),
        ("ties", np.array([0.125, 0.25, 0.375, 0.25]), np.array([0.25, 0.5, 0.125, 0.125]), set()),
        ("ties3", np.array([0.125, 0.125, 0.125, 0.625]), np.array([0.0625, 0.0625, 0.0625, 0.8125]), set()),
        ("ties_ratio1", np.array([0.25, 0.25, 0.5]), np.array([0.25, 0.5, 0.25]), set()),
        ("p_eq_q", r5, r5.copy(), {"p_eq_q"}),
        ("p_eq_q_uniform", np.full(4, 0.25), np.full(4, 0.25), {"p_eq_q"}),
        ("disjoint", np.array([0.5, 0.5, 0.0, 0.0]), np.array([0.0, 0.0, 0.25, 0.75]), {"disjoint"}),
        ("onehot_p", np.eye(5)[1], s5, set()),
        ("onehot_q", r5, np.eye(5)[2], {"onehot_q"}),
        ("onehot_same", np.eye(3)[0], np.eye(3)[0], {"p_eq_q", "onehot_q"}),
        ("onehot_other", np.eye(3)[0], np.eye(3)[1], {"disjoint", "onehot_q"}),
        ("V2", np.array([1.0, 0.0]), np.array([0.5, 0.5]), set()),
        ("mass_short_p", short, s5, set()),
        ("mass_short_q", s5, short, set()),
        ("float32", dyadic_float32(r5), dyadic_float32(s5), set()),
        ("strided", strided(r5), s5[::-1], set()),
    ]
    return [(name, p, q, frozenset(tags) | {"adversarial"}) for name, p, q, tags in pairs]


def adversarial_cases():
    return [Case(f"{name}-n{n}", p, q, n, tags=tags)
            for name, p, q, tags in adversarial_pairs() for n in (1, 2, 3)]


def without_replacement_cases(cases):
    """The same instances under scheme without_replacement (degenerate ones, |supp q| < n, included)."""
    return [c.with_scheme("without_replacement") for c in cases]


def hub_cases(cases):
    """The n = 2 instances under SpecHub's hub scheme (one-token drafts included)."""
    return [c.with_scheme("hub") for c in cases if c.n == 2]


def topk_cases(cases, seed=5):
    """The instances under the deterministic topk scheme, plus ties in q across the top-n boundary
    (lowest id first) and supports smaller than n."""
    rng = np.random.default_rng(seed)
    ties = [("ties_boundary", [0.1, 0.3, 0.3, 0.3]), ("ties_first", [0.3, 0.3, 0.3, 0.1]),
            ("ties_low_ids_last", [0.4, 0.1, 0.1, 0.2, 0.2]), ("support2", [0.0, 0.6, 0.0, 0.4, 0.0])]
    extra = [Case(f"{name}-n{n}", dirichlet(rng, len(q), 1.0), np.array(q), n, tags=frozenset({"adversarial"}))
             for name, q in ties for n in (1, 2, 3)]
    return [c.with_scheme("topk") for c in cases + extra]


def independent_cases(count, seed=99):
    """Different drafts qs (n, V), n in {2, 3}: random, plus adversarial rows."""
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(count):
        conc = (0.3, 5.0)[k % 2]
        V, n = int(rng.integers(2, 7)), 2 + k % 2
        cases.append(Case(f"indep{k}-V{V}-n{n}-c{conc}", dirichlet(rng, V, conc), dirichlet(rng, V, conc, n), n,
                          "independent", frozenset({"random"})))
    adversarial = frozenset({"adversarial"})
    for name, p, q, _ in adversarial_pairs():
        layout = np.asfortranarray if name == "strided" else np.asarray  # (n, V) non-contiguous
        for n in (2, 3):
            rows = [q] + [dirichlet(rng, len(p), 1.0) for _ in range(n - 1)]
            if q.dtype == np.float32:
                rows = [dyadic_float32(row) for row in rows]
            qs = layout(np.array(rows))
            cases.append(Case(f"indep-{name}-n{n}", p, qs, n, "independent", adversarial))
        cases.append(Case(f"indep-{name}-same-n2", p, layout(np.array([q, q])), 2, "independent",
                          adversarial | {"same_rows"}))
    return cases


RANDOM = random_cases(300)
ADVERSARIAL = adversarial_cases()
IID = RANDOM + ADVERSARIAL
WITHOUT_REPLACEMENT = without_replacement_cases(IID)
INDEPENDENT = independent_cases(100)
HUB = hub_cases(IID)
TOPK = topk_cases(RANDOM[:100] + ADVERSARIAL)
ALL_CASES = IID + WITHOUT_REPLACEMENT + INDEPENDENT + HUB + TOPK
CASES_BY_SCHEME = {"iid": IID, "without_replacement": WITHOUT_REPLACEMENT, "independent": INDEPENDENT, "hub": HUB,
                   "topk": TOPK}


def small_sample(cases, n_random):
    """The first n_random random cases plus every adversarial one (for the costlier enumerations)."""
    return [c for c in cases if "random" in c.tags][:n_random] + [c for c in cases if "adversarial" in c.tags]


# ----------------------------------------------------------------------------- verifiers

@dataclass(frozen=True)
class VerifierConfig:
    name: str
    options: tuple = ()  # sorted (key, value) pairs, hashable
    ns: tuple = (1, 2, 3)

    @property
    def marginal_tolerance(self):
        """Every verifier meets p to TOL, Global Resolution included (exact by default); its raw
        plan (exact=False) only to the Lemma 6.6 bound, 15 tau."""
        options = dict(self.options)
        return 15 * options["tau"] if self.name == "global_resolution" and options.get("exact") is False else TOL

    @property
    def id(self):
        return "-".join([self.name, *(str(v) for _, v in self.options)])

    def make(self):
        import multidraft as md
        return md.verifier(self.name, **dict(self.options))


def verifier_configs():
    """Every verifier in md.verifier_names(); "otlp" once per (method, scheme)."""
    import multidraft as md
    configs = []
    for name in md.verifier_names():
        if name == "otlp":
            configs += [VerifierConfig(name, (("method", m), ("scheme", s)), ns=(2,) if s == "hub" else (1, 2, 3)) for m in METHODS
                        for s in CASES_BY_SCHEME]
        elif name == "sps":
            configs.append(VerifierConfig(name, ns=(1,)))
        elif name == "spechub":
            configs.append(VerifierConfig(name, ns=(2,)))
        elif name == "khisti":
            configs += [VerifierConfig(name, (("scheme", s),)) for s in ("iid", "independent")]
            configs.append(VerifierConfig(name, (("scheme", "iid"), ("truncation", 1))))
        elif name == "global_resolution":
            configs += [VerifierConfig(name, (("tau", tau),)) for tau in (1e-3, 1e-6)]
            configs.append(VerifierConfig(name, (("tau", 1e-3), ("exact", False))))
        else:
            configs.append(VerifierConfig(name))
    return configs


def verifier_cases(config, n_random):
    """(config, case) pairs: cases of the verifier's draft scheme with a supported n."""
    scheme = config.make().scheme_kind
    return [(config, c) for c in small_sample(CASES_BY_SCHEME[scheme], n_random) if c.n in config.ns]


def batch_of(config, B=4, V=5, n=None, seed=11):
    """B random rows (p (B, V), q (B, V) or (B, n, V), drafts (B, n)) for a verifier, drafts from v.draft."""
    v = config.make()
    n = n or max(config.ns)
    rng = np.random.default_rng(seed)
    p = dirichlet(rng, V, 1.0, B)
    q = dirichlet(rng, V, 1.0, (B, n) if v.scheme_kind == "independent" else B)
    drafts = np.array([v.draft(q[b], n, rng) for b in range(B)])
    return v, p, q, drafts


# `make test` sets MULTIDRAFT_REQUIRE_ALL_TESTS=1: there every optional dependency is installed, so a
# skipped test (a missing torch, corpus or ISA core) would be a test that silently cannot fail.
# A plain `pytest` without the extras keeps its skips (each with its reason).
def pytest_sessionfinish(session, exitstatus):
    import os

    if os.environ.get("MULTIDRAFT_REQUIRE_ALL_TESTS") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        reasons = sorted({str(getattr(report, "longrepr", ""))[:200] for report in skipped})
        reporter.write_line(f"MULTIDRAFT_REQUIRE_ALL_TESTS=1: {len(skipped)} test(s) skipped, which make test "
                            "does not allow:", red=True)
        for reason in reasons:
            reporter.write_line(f"  {reason}", red=True)
        session.exitstatus = 1
