"""``lakelog client-quotas``: Kafka's ``kafka-configs --entity-type users/clients`` for quotas.

    lakelog client-quotas --alter --user alice --add-config producer_byte_rate=1048576
    lakelog client-quotas --describe [--user alice] [--client-id app]

Quotas are bytes (or requests) per second per broker (docs/security.md).
"""

from __future__ import annotations

import argparse

from lakelog.cli.cluster import admin_client
from lakelog.cli.common import add_bootstrap, parse_key_values
from lakelog.errors import InvalidConfigError
from lakelog.security.quota import DEFAULT, QuotaEntity, parse_limits


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("client-quotas", help="set and show client quotas (kafka-configs)")
    add_bootstrap(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="change one entity's quotas")
    action.add_argument("--describe", action="store_true", help="show quota overrides")
    parser.add_argument("--user", help="user name (the principal User:<name>)")
    parser.add_argument("--user-default", action="store_true", help="the <default> user")
    parser.add_argument("--client-id", help="client id (X-Lakelog-Client-Id)")
    parser.add_argument("--client-id-default", action="store_true", help="the <default> client")
    parser.add_argument("--add-config", action="append", help="name=value[,name=value]")
    parser.add_argument("--delete-config", action="append", help="name[,name]")
    parser.set_defaults(run=run)


def entity_of(args: argparse.Namespace) -> QuotaEntity:
    if args.user and args.user_default:
        raise InvalidConfigError("give --user or --user-default, not both")
    if args.client_id and args.client_id_default:
        raise InvalidConfigError("give --client-id or --client-id-default, not both")
    user = DEFAULT if args.user_default else args.user
    client_id = DEFAULT if args.client_id_default else args.client_id
    return QuotaEntity(user, client_id).check()


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
            deleted = [n.strip() for item in args.delete_config or [] for n in item.split(",")]
            if not values and not deleted:
                raise InvalidConfigError("--alter needs --add-config and/or --delete-config")
            after = admin.alter_client_quotas(entity, values, [d for d in deleted if d])
            print(f"Quotas of {entity.key()}: {_format(after)}")
            return 0
        user = DEFAULT if args.user_default else args.user
        client_id = DEFAULT if args.client_id_default else args.client_id
        for item in admin.describe_client_quotas(user, client_id):
            entity = QuotaEntity(item["user"], item["client_id"])
            print(f"Quotas of {entity.key()}: {_format(item['quotas'])}")
        return 0


def _format(quotas: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted(quotas.items())) or "(none)"
