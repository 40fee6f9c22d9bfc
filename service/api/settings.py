"""The service's settings from the environment: what ``uvicorn --factory`` workers start from.

``cosched serve`` sets them for its workers (``environ``) from its own checked arguments; the variable names
are the documented ``COSCHED_*`` ones. A bad value is an InputError in one line.
"""

from __future__ import annotations

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from env.errors import InputError

ENV_NODE, ENV_MODEL, ENV_TOKEN = "COSCHED_SERVE_NODE", "COSCHED_SERVE_MODEL", "COSCHED_TOKEN"
ENV_BUDGET = "COSCHED_SERVE_SEARCH_BUDGET"


class ServiceSettings(BaseSettings):
    """The node plans are for, the model, the bearer token and agent-search's budget (None: the default)."""

    # case_sensitive: exactly the variables os.environ names; populate_by_name: keyword arguments by field name
    model_config = SettingsConfigDict(case_sensitive=True, populate_by_name=True, extra="ignore")

    node: str = Field("local", validation_alias=ENV_NODE)
    model: str | None = Field(None, validation_alias=ENV_MODEL)
    token: str | None = Field(None, validation_alias=ENV_TOKEN)
    search_budget: int | None = Field(None, validation_alias=ENV_BUDGET)

    @field_validator("model", "token", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return value or None  # an empty variable is an unset one

    @field_validator("search_budget", mode="before")
    @classmethod
    def _whole_number(cls, value: object) -> object:
        if value is None or value == "":
            return None
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                raise ValueError(f"must be a whole number of rollouts, not {value!r}") from None
        return value

    @classmethod
    def load(cls, **given: object) -> ServiceSettings:
        """The environment's settings, ``given`` (by field name) taking precedence."""
        try:
            return cls(**given)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise InputError(f"{where}: {str(err['msg']).removeprefix('Value error, ')}") from None

    def environ(self) -> dict[str, str | None]:
        """These settings as environment variables (None: unset it), for worker processes to start from."""
        budget = str(self.search_budget) if self.search_budget is not None else None
        return {ENV_NODE: self.node, ENV_MODEL: self.model, ENV_TOKEN: self.token, ENV_BUDGET: budget}
