"""Property-based fuzzing of a real broker from its own OpenAPI document (schemathesis).

Every operation gets generated requests (valid and invalid); the broker must
never answer 5xx and every answer must match the documented response schema.
One broker subprocess on a local root, with a topic already holding records,
serves every shard of the operations. Path parameters often name that topic,
so generation reaches the produce/fetch/offset logic instead of stopping at
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import os
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.hooks import HookContext
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

TOPIC = "fuzz"
MAX_WAIT_MS = 20
MAX_PARTITIONS = 12
# The operations are dealt round-robin into shards, so parallel test workers share the run.
SHARDS = 6


@pytest.fixture(scope="module")
def fuzz_broker(
    tmp_path_factory: pytest.TempPathFactory, start_module_broker: Callable[..., BrokerProcess]
) -> BrokerProcess:
    """One broker for every shard of the module: a shard fuzzes the broker the others left."""
    root = RootSpec(str(tmp_path_factory.mktemp("fuzz-root")))
    # A short long-poll ceiling keeps generated fetches with max_wait_ms from stalling the run;
    # larger values are answered 400, which is part of what gets checked.
    broker = start_module_broker(root, fetch_max_wait_ms=MAX_WAIT_MS, linger_ms=1, max_block_ms=100)
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        http.post("/v1/topics", json={"name": TOPIC, "partitions": 2}).raise_for_status()
        records = [{"key": f"k{i}", "value": f'{{"n": {i}}}'} for i in range(8)]
        http.post(f"/v1/topics/{TOPIC}/records", json={"records": records}).raise_for_status()
    return broker


@pytest.fixture
def fuzz_schema(fuzz_broker: BrokerProcess) -> Any:
    schema = schemathesis.openapi.from_url(f"{fuzz_broker.url}/openapi.json")
    for hook in (flatmap_path_parameters, flatmap_query, flatmap_body):
        schema.hook(hook)
    return schema


def flatmap_path_parameters(
    context: HookContext, path_parameters: dict[str, Any]
) -> st.SearchStrategy[dict[str, Any]]:
    """Most cases aim at the existing topic (and its partitions), never to delete it."""
    if (
        not path_parameters
        or "topic" not in path_parameters
        or (context.operation is not None and context.operation.method.upper() == "DELETE")
    ):
        return st.just(path_parameters)
    real: dict[str, Any] = {**path_parameters, "topic": TOPIC}
    if isinstance(path_parameters.get("partition"), int):  # negative cases keep theirs
        real["partition"] = path_parameters["partition"] % 2
    return st.sampled_from([real, real, real, path_parameters])


def flatmap_query(context: HookContext, query: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Mostly, free-text parameters get values the broker understands."""
    if not isinstance(query, dict):
        return st.just(query)
    fixed = dict(query)
    if "acks" in fixed:
        fixed["acks"] = {"0": "0", "1": "1"}.get(str(fixed["acks"])[:1], "all")
    if isinstance(fixed.get("partition"), int):
        fixed["partition"] = fixed["partition"] % 2
    if isinstance(fixed.get("max_wait_ms"), int):
        fixed["max_wait_ms"] = fixed["max_wait_ms"] % (MAX_WAIT_MS + 1)
    for name in ("offset", "timestamp"):
        if name in fixed:
            fixed[name] = ["earliest", "latest", "0", "3"][len(str(fixed[name])) % 4]
    return st.sampled_from([fixed, fixed, fixed, query])


def flatmap_body(context: HookContext, body: Any) -> st.SearchStrategy[Any]:
    """Most JSON produce bodies are made acceptable, so they reach the commit path.

    Generated keys and values are arbitrary JSON, which only the json format accepts,
    and generated partitions rarely exist; without this nearly every produce stops at
    validation and nothing after it (timestamps, headers, idempotence) gets fuzzed.
    """
    if isinstance(body, dict) and isinstance(body.get("count"), int):
        # Add partitions, but few: thousands would make every later describe slow.
        return st.just({**body, "count": min(body["count"], MAX_PARTITIONS)})
    if isinstance(body, dict) and isinstance(body.get("partitions"), int):
        return st.just({**body, "partitions": min(body["partitions"], MAX_PARTITIONS)})
    records = body.get("records") if isinstance(body, dict) else None
    if not isinstance(records, list) or not all(
        isinstance(r, dict) and isinstance(r.get("headers", []), list) for r in records
    ):
        return st.just(body)  # a negative case: leave it broken
    records = [
        {
            **r,
            "partition": r["partition"] % 2 if isinstance(r.get("partition"), int) else None,
            "headers": [
                h
                for h in r.get("headers", [])
                if isinstance(h, dict) and isinstance(h.get("value"), str | None)
            ],
        }
        for r in records
    ]
    fixed = {**body, "key_format": "json", "value_format": "json", "records": records}
    return st.sampled_from([fixed, fixed, fixed, body])


FUZZ_SETTINGS = settings(
    # FUZZ_EXAMPLES=500 for a deeper run by hand.
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "25")),
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is reported as found
    suppress_health_check=list(HealthCheck),
    database=None,
)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_broker_never_fails_and_matches_its_schema(fuzz_schema: Any, shard: int) -> None:
    failures: list[str] = []
    answered: Counter[tuple[str, int]] = Counter()
    operations = sorted(
        (result.ok() for result in fuzz_schema.get_all_operations()), key=lambda op: op.label
    )
    assert len(operations) >= 10, [op.label for op in operations]
    mine = operations[shard::SHARDS]
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        for operation in mine:

            @FUZZ_SETTINGS
            @given(case=operation.as_strategy(generation_mode=mode))
            def check(case: Case[Any]) -> None:
                response = case.call_and_validate(
                    checks=[not_a_server_error, response_schema_conformance], timeout=30
                )
                answered[(case.operation.label, response.status_code)] += 1

            try:
                check()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE  # nothing to get wrong without parameters
            except Exception as exc:  # collect every failure, then report them all
                failures.append(f"{mode} {operation.label}: {exc}\n{traceback.format_exc()}")
    assert not failures, "\n\n".join(failures)
    # The hooks did their job: generated requests got past validation into the log.
    for label in (
        "POST /v1/topics/{topic}/records",
        "GET /v1/topics/{topic}/partitions/{partition}/records",
    ):
        if any(op.label == label for op in mine):
            assert answered[(label, 200)] > 0, sorted(answered.items())
