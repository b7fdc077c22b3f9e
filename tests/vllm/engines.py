"""In-process vLLM engines for the plugin's tests, and what they report."""
import contextlib


@contextlib.contextmanager
def engine(model: str, **kwargs):
    """An in-process vLLM engine in float32, shut down on exit.

    The shutdown is explicit: an engine left to the garbage collector tears down the process's
    distributed state whenever it is collected, which may be while the next engine starts. A
    refused engine may have set that state up before failing: it is torn down too.
    """
    from vllm import LLM
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    try:
        llm = LLM(model=model, distributed_executor_backend="uni", enforce_eager=True, dtype="float32", seed=0,
                  max_model_len=128, disable_log_stats=False, **kwargs)
    except Exception:
        cleanup_dist_env_and_memory()
        raise
    try:
        yield llm
    finally:
        llm.llm_engine.engine_core.shutdown()


def runner(llm):
    """The engine's model runner (the V1 runner of the CPU build)."""
    return llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner


def spec_counts(llm) -> dict:
    """vLLM's speculative-decoding counters: drafts, draft tokens and accepted tokens."""
    found = {}
    for metric in llm.get_metrics():
        for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            if metric.name == f"vllm:spec_decode_{name}":
                found[name] = metric.value
    return found
