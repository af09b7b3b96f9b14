"""``lakelog client-quotas``: Kafka's ``kafka-configs --entity-type users/clients`` for quotas.

    lakelog client-quotas --alter --user alice --add-config producer_byte_rate=1048576
    lakelog client-quotas --describe [--user alice] [--client-id app]

Quotas are bytes (or requests) per second per broker (docs/security.md).
"""

from __future__ import annotations

import argparse

from lakelog.cli.cluster import admin_client
from lakelog.cli.commands import COMMANDS
from lakelog.cli.common import SubParsers, add_tool, parse_key_values, split_names
from lakelog.errors import InvalidConfigError
from lakelog.security.quota import DEFAULT, QuotaEntity, parse_limits


def register(sub: SubParsers) -> None:
    actions = {"alter": "change one entity's quotas", "describe": "show quota overrides"}
    parser = add_tool(sub, "client-quotas", COMMANDS["client-quotas"].help, run, actions)
    parser.add_argument("--user", help="user name (the principal User:<name>)")
    parser.add_argument("--user-default", action="store_true", help="the <default> user")
    parser.add_argument("--client-id", help="client id (X-Lakelog-Client-Id)")
    parser.add_argument("--client-id-default", action="store_true", help="the <default> client")
    parser.add_argument("--add-config", action="append", help="name=value[,name=value]")
    parser.add_argument("--delete-config", action="append", help="name[,name]")


def _selected(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The (user, client id) the flags name, ``DEFAULT`` for a ``--*-default``."""
    user = DEFAULT if args.user_default else args.user
    return user, DEFAULT if args.client_id_default else args.client_id


def entity_of(args: argparse.Namespace) -> QuotaEntity:
    if args.user and args.user_default:
        raise InvalidConfigError("give --user or --user-default, not both")
    if args.client_id and args.client_id_default:
        raise InvalidConfigError("give --client-id or --client-id-default, not both")
    return QuotaEntity(*_selected(args)).check()


def run(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        if args.alter:
            entity = entity_of(args)
            raw = parse_key_values(args.add_config, "--add-config")
            try:
                values = {k: float(v) for k, v in raw.items()}
            except ValueError:
                raise InvalidConfigError(f"quota values must be numbers: {raw}") from None
            parse_limits(values)  # names a bad quota before anything is sent
            if not values and not args.delete_config:
                raise InvalidConfigError("--alter needs --add-config and/or --delete-config")
            deleted = split_names(args.delete_config)
            _print(entity, admin.alter_client_quotas(entity, values, deleted))
            return 0
        for item in admin.describe_client_quotas(*_selected(args)):
            _print(QuotaEntity(item["user"], item["client_id"]), item["quotas"])
        return 0


def _print(entity: QuotaEntity, quotas: dict[str, float]) -> None:
    text = ", ".join(f"{k}={v:g}" for k, v in sorted(quotas.items())) or "(none)"
    print(f"Quotas of {entity.key()}: {text}")
