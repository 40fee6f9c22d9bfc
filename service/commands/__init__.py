"""Each verb module has ``register(subparsers)``, which adds its parser and sets ``handler``."""

from service.commands import calibrate, eval as eval_, jobs, node, profile, run, schedule, serve, train

VERBS = [node.register, profile.register, jobs.register, schedule.register, run.register, eval_.register, train.register, serve.register, calibrate.register]
