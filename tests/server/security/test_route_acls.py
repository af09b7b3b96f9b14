"""Every route of the broker app has an access rule, and a route without one is refused."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi import APIRouter, Depends
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient

from server.app import create_app
from server.security import enforce
from server.security.route_acls import ROUTE_RULES, Access, rule_for, template_key
from server.settings import BrokerSettings


def app_routes(tmp_path: Path) -> list[tuple[str, str]]:
    app = create_app(BrokerSettings(root=str(tmp_path / "root")))
    found = []
    for context in iter_route_contexts(app.routes):
        methods = getattr(context.original_route, "methods", None) or set()
        found += [(m, str(context.path)) for m in sorted(methods)]
    return found


def test_every_route_has_a_rule_naming_its_resource(tmp_path: Path) -> None:
    routes = app_routes(tmp_path)
    assert len(routes) > 40
    missing = [(m, p) for m, p in routes if rule_for(m, p) is None]
    assert missing == [], (
        f"routes without an access rule in server/security/route_acls.py: {missing}"
    )
    for method, path in routes:
        rule = rule_for(method, path)
        assert rule is not None
        if rule.access is Access.RESOURCE and rule.name_params:
            assert any("{" + p + "}" in path for p in rule.name_params), (method, path, rule)


def test_table_templates_are_unique_after_blanking_parameter_names() -> None:
    keys = [(m, template_key(p)) for m, p in ROUTE_RULES]
    assert len(keys) == len(set(keys))


def test_a_route_missing_from_the_table_fails_closed(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"api_keys": [{"principal": "User:root", "key": "k"}]}))
    settings = BrokerSettings(
        root=str(tmp_path / "root"),
        auth_mode="api_key",
        api_keys_file=str(keys),
        super_users="User:root",
        checkpoint_process=False,  # in-process only: no checkpoint helper
    )
    app = create_app(settings)
    extra = APIRouter()

    @extra.get("/v1/not-in-the-table")
    def unlisted() -> dict[str, str]:
        return {"reached": "yes"}

    app.include_router(extra, dependencies=[Depends(enforce)])
    with TestClient(app) as http:
        answer = http.get("/v1/not-in-the-table", headers={"X-API-Key": "k"})
        assert answer.status_code == 403
        assert answer.json()["error"] == "CLUSTER_AUTHORIZATION_FAILED"
        assert "no access rule" in answer.json()["message"]
        assert http.get("/v1/whoami", headers={"X-API-Key": "k"}).status_code == 200
