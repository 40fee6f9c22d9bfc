"""Each verb module has ``register(subparsers)``, which adds its parser and sets ``handler``."""

from service.commands import node, profile, run, serve

VERBS = [node.register, profile.register, run.register, serve.register]
