"""Each verb module has ``register(subparsers)``, which adds its parser and sets ``handler``."""

from service.commands import node, profile

VERBS = [node.register, profile.register]
