"""What every HTTP route needs: one table from (method, route template) to an access rule.

The enforcement dependency (``server.security.enforce``) looks the matched
route up here. A route that is not in the table is refused (fail closed) and
``tests/server/security/test_route_acls.py`` checks that every route of the
app has an entry, so a new endpoint cannot ship unprotected by accident.

Templates are compared with their parameter names blanked (``/v1/groups/{}``),
so a route keeps its rule if a parameter is renamed. The operations follow
Kafka's API-to-ACL mapping; resources named in a body are checked by the
handler with ``authorize``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from lakelog.security.acl import Operation, ResourceType
from lakelog.security.quota import QuotaKind


class Access(enum.Enum):
    OPEN = "open"  # no credentials needed (health checks, API docs)
    AUTHENTICATED = "authenticated"  # any authenticated principal
    RESOURCE = "resource"  # an ACL check on one resource
    METRICS = "metrics"  # open, or CLUSTER DESCRIBE when metrics_require_auth is set


TOPIC_PARAMS = ("topic", "topic_name")
GROUP_PARAMS = ("group", "group_id", "group_name", "consumer_group_id")


@dataclass(frozen=True, slots=True)
class RouteRule:
    access: Access
    resource_type: ResourceType | None = None
    operation: Operation | None = None
    #: Path parameters that may hold the resource name (first present wins).
    name_params: tuple[str, ...] = ()
    #: JSON body field naming the topic (create topic): CLUSTER <op> or TOPIC <op> on it.
    body_name: str | None = None
    #: The byte quota the route counts against (produce or fetch).
    quota: QuotaKind | None = None


OPEN = RouteRule(Access.OPEN)
AUTHENTICATED = RouteRule(Access.AUTHENTICATED)
METRICS = RouteRule(Access.METRICS)


def topic(operation: Operation, quota: QuotaKind | None = None) -> RouteRule:
    return RouteRule(Access.RESOURCE, ResourceType.TOPIC, operation, TOPIC_PARAMS, quota=quota)


def group(operation: Operation) -> RouteRule:
    return RouteRule(Access.RESOURCE, ResourceType.GROUP, operation, GROUP_PARAMS)


def cluster(operation: Operation) -> RouteRule:
    return RouteRule(Access.RESOURCE, ResourceType.CLUSTER, operation)


def subject(operation: Operation) -> RouteRule:
    return RouteRule(Access.RESOURCE, ResourceType.SUBJECT, operation, ("subject",))


R, W, D = Operation.READ, Operation.WRITE, Operation.DESCRIBE
PRODUCE, FETCH = QuotaKind.PRODUCE, QuotaKind.FETCH
CREATE_TOPIC = RouteRule(Access.RESOURCE, ResourceType.CLUSTER, Operation.CREATE, body_name="name")
CREATE_TOPIC_V3 = RouteRule(
    Access.RESOURCE, ResourceType.CLUSTER, Operation.CREATE, body_name="topic_name"
)
V3 = "/v3/clusters/{cluster_id}"
V3_TOPIC = V3 + "/topics/{topic_name}"
V3_PARTITION = V3_TOPIC + "/partitions/{partition_id}"
V3_GROUP = V3 + "/consumer-groups/{consumer_group_id}"
V3_CONSUMER = V3_GROUP + "/consumers/{consumer_id}"
V3_BROKER = V3 + "/brokers/{broker_id}"

#: (method, template) -> rule. ``HEAD`` follows ``GET``.
ROUTE_RULES: dict[tuple[str, str], RouteRule] = {
    # -- native records (server/routes/records.py)
    ("POST", "/v1/topics/{topic}/records"): topic(W, PRODUCE),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/records"): topic(R, FETCH),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/offsets"): topic(D),
    ("GET", "/v1/topics/{topic}/offsets"): topic(D),
    # -- topic admin (server/routes/admin.py)
    ("GET", "/v1/topics"): AUTHENTICATED,
    ("POST", "/v1/topics"): CREATE_TOPIC,
    ("GET", "/v1/topics/{topic}"): topic(D),
    ("PATCH", "/v1/topics/{topic}/configs"): topic(Operation.ALTER),
    ("POST", "/v1/topics/{topic}/partitions"): topic(Operation.ALTER),
    ("DELETE", "/v1/topics/{topic}"): topic(Operation.DELETE),
    ("GET", "/v1/brokers"): AUTHENTICATED,
    ("GET", "/healthz"): OPEN,
    # -- broker to broker (server/routes/commit_handoff.py)
    ("POST", "/internal/v1/topics/{topic}/commits"): cluster(Operation.CLUSTER_ACTION),
    ("GET", "/metrics"): METRICS,
    # -- FastAPI's own documentation routes
    ("GET", "/openapi.json"): OPEN,
    ("GET", "/docs"): OPEN,
    ("GET", "/docs/oauth2-redirect"): OPEN,
    ("GET", "/redoc"): OPEN,
    # -- REST Proxy v2 (server/rest_proxy/v2_records.py)
    ("GET", "/topics"): AUTHENTICATED,
    ("GET", "/topics/{topic}"): topic(D),
    ("POST", "/topics/{topic}"): topic(W, PRODUCE),
    ("GET", "/topics/{topic}/partitions"): topic(D),
    ("GET", "/topics/{topic}/partitions/{partition}"): topic(D),
    ("POST", "/topics/{topic}/partitions/{partition}"): topic(W, PRODUCE),
    ("GET", "/topics/{topic}/partitions/{partition}/offsets"): topic(D),
    ("GET", "/brokers"): AUTHENTICATED,
    # -- REST Proxy v2 consumer instances (topics named in bodies: authorize() in handlers)
    ("POST", "/consumers/{group}"): group(R),
    ("DELETE", "/consumers/{group}/instances/{instance}"): group(R),
    ("POST", "/consumers/{group}/instances/{instance}/subscription"): group(R),
    ("GET", "/consumers/{group}/instances/{instance}/subscription"): group(R),
    ("DELETE", "/consumers/{group}/instances/{instance}/subscription"): group(R),
    ("POST", "/consumers/{group}/instances/{instance}/assignments"): group(R),
    ("GET", "/consumers/{group}/instances/{instance}/assignments"): group(R),
    ("POST", "/consumers/{group}/instances/{instance}/offsets"): group(R),
    ("GET", "/consumers/{group}/instances/{instance}/offsets"): group(D),
    ("POST", "/consumers/{group}/instances/{instance}/positions"): group(R),
    ("POST", "/consumers/{group}/instances/{instance}/positions/beginning"): group(R),
    ("POST", "/consumers/{group}/instances/{instance}/positions/end"): group(R),
    ("GET", "/consumers/{group}/instances/{instance}/records"): group(R),
    # -- REST Proxy v3 (server/rest_proxy/v3_records.py)
    ("GET", "/v3/clusters"): AUTHENTICATED,
    ("GET", "/v3/clusters/{cluster_id}"): AUTHENTICATED,
    ("POST", "/v3/clusters/{cluster_id}/topics/{topic_name}/records"): topic(W, PRODUCE),
    ("POST", "/v3/clusters/{cluster_id}/topics/{topic_name}/records:batch"): topic(W, PRODUCE),
    # -- REST Proxy v3 topics (server/rest_proxy/v3_topics.py), as the native admin routes
    ("GET", V3 + "/topics"): AUTHENTICATED,  # lists what the caller may DESCRIBE
    ("POST", V3 + "/topics"): CREATE_TOPIC_V3,
    ("GET", V3_TOPIC): topic(D),
    ("PATCH", V3_TOPIC): topic(Operation.ALTER),
    ("DELETE", V3_TOPIC): topic(Operation.DELETE),
    ("GET", V3_TOPIC + "/partitions"): topic(D),
    ("GET", V3_PARTITION): topic(D),
    ("GET", V3_PARTITION + "/replicas"): topic(D),
    ("GET", V3_PARTITION + "/replicas/{broker_id}"): topic(D),
    ("GET", V3_PARTITION + "/reassignment"): topic(D),
    ("GET", V3_TOPIC + "/partitions/-/reassignment"): topic(D),
    ("GET", V3 + "/topics/-/partitions/-/reassignment"): cluster(D),
    ("GET", V3 + "/topics/-/configs"): AUTHENTICATED,  # configs of describable topics
    ("GET", V3_TOPIC + "/configs"): topic(D),
    ("GET", V3_TOPIC + "/configs/{name}"): topic(D),
    ("PUT", V3_TOPIC + "/configs/{name}"): topic(Operation.ALTER),
    ("DELETE", V3_TOPIC + "/configs/{name}"): topic(Operation.ALTER),
    ("POST", V3_TOPIC + "/configs:alter"): topic(Operation.ALTER),
    # -- REST Proxy v3 brokers and ACLs (server/rest_proxy/v3_cluster.py)
    ("GET", V3 + "/brokers"): AUTHENTICATED,
    ("GET", V3_BROKER): AUTHENTICATED,
    ("GET", V3 + "/brokers/-/configs"): cluster(D),
    ("GET", V3_BROKER + "/configs"): cluster(D),
    ("GET", V3_BROKER + "/configs/{name}"): cluster(D),
    ("GET", V3_BROKER + "/partition-replicas"): AUTHENTICATED,  # of describable topics
    ("GET", V3 + "/broker-configs"): cluster(D),
    ("GET", V3 + "/broker-configs/{name}"): cluster(D),
    ("GET", V3 + "/acls"): cluster(D),
    ("POST", V3 + "/acls"): cluster(Operation.ALTER),
    ("POST", V3 + "/acls:batch"): cluster(Operation.ALTER),
    ("DELETE", V3 + "/acls"): cluster(Operation.ALTER),
    # -- REST Proxy v3 consumer groups (server/rest_proxy/v3_groups.py)
    ("GET", V3 + "/consumer-groups"): AUTHENTICATED,  # lists what the caller may DESCRIBE
    ("GET", V3_GROUP): group(D),
    ("GET", V3_GROUP + "/consumers"): group(D),
    ("GET", V3_CONSUMER): group(D),
    ("GET", V3_CONSUMER + "/assignments"): group(D),
    ("GET", V3_CONSUMER + "/assignments/{topic_name}/partitions/{partition_id}"): group(D),
    ("GET", V3_GROUP + "/lags"): group(D),
    ("GET", V3_GROUP + "/lags/{topic_name}/partitions/{partition_id}"): group(D),
    ("GET", V3_GROUP + "/lag-summary"): group(D),
    # -- consumer groups (docs/consumer-groups.md; offset commits check topics in the handler)
    ("GET", "/v1/groups"): AUTHENTICATED,
    ("GET", "/v1/groups/{group}"): group(D),
    ("DELETE", "/v1/groups/{group}"): group(Operation.DELETE),
    ("GET", "/v1/groups/{group}/coordinator"): group(D),
    ("POST", "/v1/groups/{group}/members"): group(R),
    ("POST", "/v1/groups/{group}/members/{member_id}/sync"): group(R),
    ("POST", "/v1/groups/{group}/members/{member_id}/heartbeat"): group(R),
    ("DELETE", "/v1/groups/{group}/members/{member_id}"): group(R),
    ("POST", "/v1/groups/{group}/offsets"): group(R),
    ("GET", "/v1/groups/{group}/offsets"): group(D),
    ("POST", "/v1/groups/{group}/offsets:reset"): group(R),
    # -- ACL and quota administration (server/security/admin_routes.py)
    ("GET", "/v1/acls"): cluster(D),
    ("POST", "/v1/acls"): cluster(Operation.ALTER),
    ("DELETE", "/v1/acls"): cluster(Operation.ALTER),
    ("GET", "/v1/quotas"): cluster(D),
    ("PATCH", "/v1/quotas"): cluster(Operation.ALTER),
    ("GET", "/v1/whoami"): AUTHENTICATED,
    # -- Schema Registry (server/schema_registry/routes.py), as Confluent's ACL authorizer:
    # schemas by id answer any authenticated principal (a consumer has only the id)
    ("GET", "/schemas/types"): AUTHENTICATED,
    ("GET", "/schemas/ids/{schema_id}"): AUTHENTICATED,
    ("GET", "/schemas/ids/{schema_id}/schema"): AUTHENTICATED,
    ("GET", "/schemas/ids/{schema_id}/subjects"): AUTHENTICATED,  # describable subjects
    ("GET", "/schemas/ids/{schema_id}/versions"): AUTHENTICATED,  # describable subjects
    ("GET", "/subjects"): AUTHENTICATED,  # lists what the caller may DESCRIBE
    ("GET", "/subjects/{subject}/versions"): subject(R),
    ("POST", "/subjects/{subject}/versions"): subject(W),
    ("POST", "/subjects/{subject}"): subject(R),
    ("DELETE", "/subjects/{subject}"): subject(Operation.DELETE),
    ("GET", "/subjects/{subject}/versions/{version}"): subject(R),
    ("GET", "/subjects/{subject}/versions/{version}/schema"): subject(R),
    ("GET", "/subjects/{subject}/versions/{version}/referencedby"): subject(R),
    ("DELETE", "/subjects/{subject}/versions/{version}"): subject(Operation.DELETE),
    ("POST", "/compatibility/subjects/{subject}/versions/{version}"): subject(R),
    ("POST", "/compatibility/subjects/{subject}/versions"): subject(R),
    ("GET", "/config"): AUTHENTICATED,
    ("PUT", "/config"): cluster(Operation.ALTER_CONFIGS),
    ("DELETE", "/config"): cluster(Operation.ALTER_CONFIGS),
    ("GET", "/config/{subject}"): subject(Operation.DESCRIBE_CONFIGS),
    ("PUT", "/config/{subject}"): subject(Operation.ALTER_CONFIGS),
    ("DELETE", "/config/{subject}"): subject(Operation.ALTER_CONFIGS),
    ("GET", "/mode"): AUTHENTICATED,
    ("PUT", "/mode"): cluster(Operation.ALTER_CONFIGS),
    ("DELETE", "/mode"): cluster(Operation.ALTER_CONFIGS),
    ("GET", "/mode/{subject}"): subject(Operation.DESCRIBE_CONFIGS),
    ("PUT", "/mode/{subject}"): subject(Operation.ALTER_CONFIGS),
    ("DELETE", "/mode/{subject}"): subject(Operation.ALTER_CONFIGS),
}

_PARAM = re.compile(r"\{[^}]*\}")


def template_key(template: str) -> str:
    """A route template with its parameter names blanked: ``/v1/groups/{}/offsets``."""
    return _PARAM.sub("{}", template)


_BY_KEY: dict[tuple[str, str], RouteRule] = {
    (method, template_key(path)): rule for (method, path), rule in ROUTE_RULES.items()
}


def rule_for(method: str, template: str) -> RouteRule | None:
    """The rule of a route, or None when the table has none (the caller must refuse)."""
    wanted = "GET" if method.upper() == "HEAD" else method.upper()
    return _BY_KEY.get((wanted, template_key(template)))
