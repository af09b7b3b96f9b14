"""Typed, validated settings for opening a storage root.

Values come from arguments, ``LAKELOG_S3_*`` variables, then the standard ``AWS_*``
ones, so a root that works with the AWS CLI works with lakelog unchanged.

Field names are constructor arguments (``populate_by_name``), deliberately not
alias choices: pydantic-settings looks those up in the environment, so a stray
``REGION`` variable would silently override ``AWS_REGION``/``LAKELOG_S3_*``.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class S3Settings(BaseSettings):
    """How to reach an S3-protocol object store (AWS, MinIO, moto, ...)."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    endpoint_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("LAKELOG_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL"),
        description="Endpoint of an S3-compatible store; None means AWS itself.",
    )
    access_key_id: str | None = Field(
        default=None,
        validation_alias=AliasChoices("LAKELOG_S3_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
    )
    secret_access_key: str | None = Field(
        default=None,
        repr=False,
        validation_alias=AliasChoices("LAKELOG_S3_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"),
    )
    session_token: str | None = Field(
        default=None,
        repr=False,
        validation_alias=AliasChoices("AWS_SESSION_TOKEN"),
    )
    region: str = Field(
        default="us-east-1",
        validation_alias=AliasChoices("LAKELOG_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"),
    )

    @property
    def allow_http(self) -> bool:
        return bool(self.endpoint_url and self.endpoint_url.startswith("http://"))

    def aws_variables(self) -> dict[str, str]:
        """The standard ``AWS_*`` variables (also delta-rs options) that name this store."""
        named = {
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_SESSION_TOKEN": self.session_token,
        }
        return {name: value for name, value in named.items() if value}
