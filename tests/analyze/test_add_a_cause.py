"""A cause added from outside the package: a module with its `Cause`, one registry line,
and the verdict names it, touching nothing else (docs/architecture.md, "Adding a cause").

Here, an app that reaches Redis through a few pooled connections: Redis serves about as
many commands at once as the pool holds while the app's requests pile up waiting for one.
"""

from __future__ import annotations

from pinchpoint.analyze.causes import CAUSES, Ask, Cause
from pinchpoint.analyze.causes.cause import Finding
from pinchpoint.analyze.context import Context, busy_of, load_text, rate_of
from pinchpoint.analyze.verdict import decide

# Requests inside the app past this many times what Redis serves at once wait for a
# connection.
HELD_OVER = 2.0


def redis_pool(ask: Ask) -> Finding | None:
    """The Redis the tier calls serves about as many at once as its connections, while the
    tier holds HELD_OVER times more."""
    redis = next((c for c in ask.ctx.calls.get(ask.tier, []) if ask.ctx.roles[c] == "cache"), "")
    top = ask.steps[-1]
    served, held = busy_of(redis, top), busy_of(ask.tier, top)
    if not redis or served < 0.5 or held < HELD_OVER * served:
        return None
    slots = round(served)
    evidence = [
        f"{ask.tier} held {held:.1f} requests at once at {load_text(top)} while {redis} "
        f"served {served:.2f} (Little's law): they wait for one of {slots} connections"
    ]
    summary = f"{ask.tier}'s pool of {redis} connections is full from {load_text(ask.onset)}."
    return Finding(
        component=ask.tier,
        cause=REDIS_POOL,
        starts_at_users=ask.onset["users"],
        evidence=evidence,
        name=f"{ask.tier}'s connections to {redis} (about {slots})",
        summary=summary,
        starts_at_rate=rate_of(ask.onset),
    )


REDIS_POOL = Cause(
    name="redis_pool",
    resource="connection_pool",
    scope="tier",
    doc=__doc__ or "",
    advice="Raise the Redis client's max_connections; Redis has room.",
    saturates="the connections a tier holds to Redis",
    reads=("tiers.concurrency",),
    thresholds=(),
    needs_cpu=False,
    find=redis_pool,
)
WITH_REDIS_POOL = CAUSES.adding(REDIS_POOL, before="connection_pool")


CTX = Context(
    order=["app", "redis"],
    calls={"app": ["redis"], "redis": []},
    workers={}, cpu_count=2, generator_threads=1,
    roles={"app": "app_server", "redis": "cache"},
)  # fmt: skip


def _step(users: int, wait_ms: float) -> dict:
    # Redis serves two commands at once at every load; the app's requests wait for them.
    return {
        "step": users, "users": users, "level": float(users), "kind": "users",
        "throughput_rps": 200.0, "latency_ms": {"p50": 10.0 + wait_ms},
        "tiers": {
            "app": {"p50_ms": 10.0 + wait_ms, "self_p50_ms": 0.5 + wait_ms,
                    "concurrency": 0.9 * users},
            "redis": {"p50_ms": 9.5, "self_p50_ms": 9.5, "concurrency": 1.9},
        },
    }  # fmt: skip


STEPS = [_step(2, 0.2), _step(6, 20.0), _step(12, 50.0)]


def test_the_added_cause_is_asked_in_its_place_and_names_the_bottleneck() -> None:
    names = [c.name for c in WITH_REDIS_POOL.asked("tier")]
    assert names.index("redis_pool") == names.index("connection_pool") - 1
    assert "redis_pool" not in [c.name for c in CAUSES]
    verdict = decide(STEPS, CTX, WITH_REDIS_POOL)
    bottleneck = verdict["bottleneck"]
    assert (bottleneck["component"], bottleneck["resource"]) == ("app", "connection_pool")
    assert bottleneck["starts_at_users"] == 6
    assert verdict["headline"] == "Bottleneck: app's connections to redis (about 2) from 6 users"
    assert "app held 10.8 requests at once at 12 users while redis served 1.90" in (
        " ".join(bottleneck["evidence"])
    )


def test_without_it_the_same_steps_name_only_the_tiers_time() -> None:
    bottleneck = decide(STEPS, CTX)["bottleneck"]
    assert (bottleneck["component"], bottleneck["resource"]) == ("app", "time")


def test_it_stays_quiet_where_redis_serves_what_the_app_sends() -> None:
    calm = [_step(2, 0.2), _step(3, 15.0), _step(4, 30.0)]
    assert redis_pool(Ask("app", calm, calm[1], CTX, None, "app")) is None
