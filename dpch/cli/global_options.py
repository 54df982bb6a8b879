"""Global options after the subcommand: ``dpch query --analyst ana "SELECT ..."`` means
``dpch --analyst ana query "SELECT ..."``, as clickhouse-client takes its options anywhere.

The group's own options found after the subcommand name are moved in front of it before click
parses the line, unless that subcommand (or one below it) declares an option of the same name:
``dpch budget --analyst bob`` keeps meaning budget's own ``--analyst`` (whose budget to show).
A value given both before and after the subcommand: the later one wins (click keeps the last).
Nothing after ``--`` is touched.
"""

from __future__ import annotations

import click


def _takes_value(option: click.Option) -> bool:
    return not (option.is_flag or option.count)


def _declared(command: click.Command, ctx: click.Context) -> dict[str, bool]:
    """Option names declared by ``command`` and the commands below it → whether each takes a value."""
    names: dict[str, bool] = {}
    for param in command.params:
        if isinstance(param, click.Option):
            for opt in (*param.opts, *param.secondary_opts):
                names[opt] = _takes_value(param)
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                names.update({k: v for k, v in _declared(sub, ctx).items() if k not in names})
    return names


def hoist_global_options(group: click.Group, ctx: click.Context, args: list[str]) -> list[str]:
    """``args`` with ``group``'s options that follow the subcommand moved in front of it."""
    globals_: dict[str, click.Option] = {}
    for param in group.params:
        if isinstance(param, click.Option):
            for opt in (*param.opts, *param.secondary_opts):
                globals_[opt] = param
    i = 0
    while i < len(args):  # skip the options already in front of the subcommand
        arg = args[i]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break
        option = globals_.get(arg.split("=", 1)[0])
        i += 2 if option is not None and _takes_value(option) and "=" not in arg else 1
    if i >= len(args) or args[i] == "--":
        return args
    command = group.get_command(ctx, args[i])
    if command is None:
        return args  # click reports the unknown command
    own = _declared(command, ctx)
    hoisted: list[str] = []
    rest: list[str] = []
    j = i + 1
    while j < len(args):
        arg = args[j]
        if arg == "--":
            rest.extend(args[j:])
            break
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        takes_value = "=" not in arg and j + 1 < len(args)
        if name in globals_ and name not in own:
            step = 2 if takes_value and _takes_value(globals_[name]) else 1
            hoisted.extend(args[j:j + step])
        else:
            step = 2 if takes_value and own.get(name, False) else 1
            rest.extend(args[j:j + step])
        j += step
    return [*args[:i], *hoisted, args[i], *rest]


class GlobalOptionsGroup(click.Group):
    """A click group whose options may also be given after its subcommand (see the module doc)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(self, ctx, list(args)))
