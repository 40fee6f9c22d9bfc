"""Policies by name, built explicitly where they are used: the baselines here (``BASELINES``); the policies that need a
trained model (``agent``, ``fifo``, ``agent-search``) are added by ``training.registry.policy_registry``, which the
service and the command line call. ``env`` never imports ``training``."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from env.errors import InputError
from env.planners.baselines import BestFound, Greedy, Pairs, Policy, RandomPolicy, TimeSharing

PolicyFactory = Callable[[], Policy]

#: The default where no model is at hand (``agent-search`` with one: ``training.policies.default_policy``).
DEFAULT_POLICY = "greedy"


class Registry:
    """Policy names -> factories (each call makes a new policy object). Immutable: ``extended`` makes another."""

    def __init__(self, factories: Mapping[str, PolicyFactory], later: Mapping[str, str] | None = None) -> None:
        self._factories = dict(factories)
        self._later = dict(later or {})  # names known but not plannable here -> why (one line)

    def extended(self, factories: Mapping[str, PolicyFactory], later: Mapping[str, str] | None = None) -> "Registry":
        return Registry({**self._factories, **factories}, {**self._later, **(later or {})})

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def names(self) -> list[str]:
        return list(self._factories) + [n for n in self._later if n not in self._factories]

    def get(self, name: str) -> Policy:
        if name in self._factories:
            return self._factories[name]()
        if name in self._later:
            raise InputError(self._later[name])
        raise InputError(f"unknown policy {name!r}: choose from {', '.join(self.names())}")

    def parse(self, text: str) -> list[str]:
        """A comma-separated list of names, each known here, without repeats."""
        names = [n.strip() for n in text.split(",") if n.strip()]
        if not names:
            raise InputError("--policies is empty: give names separated by commas, e.g. greedy,timeshare")
        return self.check(names)

    def check(self, names: Iterable[str]) -> list[str]:
        names = list(dict.fromkeys(names))
        for n in names:
            if n not in self._factories:
                self.get(n)  # raises the one-line error
        return names


BASELINES = Registry({"timeshare": TimeSharing, "greedy": Greedy, "random": RandomPolicy, "pairs": Pairs,
                      "best-found": BestFound})


def get_policy(name: str) -> Policy:
    """A baseline by name (the agent policies: ``training.registry.policy_registry().get``)."""
    return BASELINES.get(name)


def parse_policies(text: str) -> list[str]:
    return BASELINES.parse(text)
