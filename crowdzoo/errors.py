"""Errors crowdzoo raises on purpose: bad input and numerical failure; and how a value is shown in
their messages. The lowest module of the package: it imports nothing of crowdzoo.

A message that advises on the settings of a fit (``max_iter``, ``learn_kernel=False``) does not spell
them in one language: it is a template whose placeholders name each setting, ``{max_iter}`` for the
name and ``{max_iter=400}`` for a value of it, with the settings listed in ``settings``. ``str()`` of
the error or warning writes them as the Python API's keyword arguments (``max_iter``,
``max_iter=400``); :meth:`Advises.render` writes them in another caller's words, the command line's
flags (``--max-iter``, ``--max-iter 400``). Only the placeholders of the listed settings are filled,
so a value shown in the message may hold braces of its own.
"""


def python_setting(name: str, value: str | None = None) -> str:
    """A setting as the Python API writes it: ``name``, or ``name=value``."""
    return name if value is None else f"{name}={value}"


def render(template: str, settings, name=python_setting) -> str:
    """``template`` with the placeholders of ``settings`` written out by ``name(setting, value)``:
    ``{s}`` as ``name(s, None)``, ``{s=v}`` as ``name(s, "v")`` (``v`` as written, e.g. ``'exact'``
    or ``False``). Other braces are left alone."""
    for s in settings:
        out, at = [], 0
        while True:
            start = template.find("{" + s, at)
            if start < 0:
                break
            end = start + len(s) + 1
            if template.startswith("}", end):
                out += [template[at:start], name(s, None)]
                at = end + 1
            elif template.startswith("=", end) and "}" in template[end:]:
                close = template.index("}", end)
                out += [template[at:start], name(s, template[end + 1:close])]
                at = close + 1
            else:  # a longer name that begins with this one's ({max_iter_x}), or a lone brace
                out.append(template[at:end])
                at = end
        template = "".join(out) + template[at:]
    return template


class Advises:
    """An error or warning whose message advises on settings of a fit: ``template`` holds a
    placeholder per mention of a setting (module docstring), ``settings`` their names; ``str()`` is the
    message in the Python API's words, :meth:`render` in another caller's."""

    template: str = ""
    settings: tuple = ()

    def render(self, name=python_setting) -> str:
        """The message with each setting written by ``name(setting, value)`` (see :func:`render`)."""
        return render(self.template, self.settings, name)


class DataError(Advises, ValueError):
    """Input data failed validation. The message names the argument/column, the row and the problem.

    The fields say the same for callers that speak another language than Python's (the command line
    builds its own message from them, naming its flags and the user's columns): ``arg``, the API
    argument at fault (a column's argument, such as ``"y"``, for a bad value in that column; two
    names joined by ", " when the fault is between them; a fit's setting, such as ``"batch_size"``);
    ``row``, the row (position) of the first offending value; ``ids``, the offending ids where there
    are several; ``problem``, what is wrong, in words that name no Python argument, without the
    argument and the row, and without advice in Python's terms. ``problem`` defaults to the message
    less its leading ``"arg: "``, for messages that hold nothing else. ``settings``: the fit settings
    the message and the problem name by placeholders (:class:`Advises`); ``problem`` is rendered in the
    Python API's words like the message, and :meth:`render_problem` in another caller's."""

    def __init__(self, message: str, *, arg: str | None = None, row: int | None = None, ids=None,
                 problem: str | None = None, settings=()):
        self.template, self.settings = message, tuple(settings)
        super().__init__(self.render())
        if problem is None and arg is not None and message.startswith(f"{arg}: "):
            problem = message[len(arg) + 2:]
        self.problem_template = problem
        self.arg, self.row, self.ids = arg, row, ids
        self.problem = None if problem is None else render(problem, self.settings)

    def render_problem(self, name=python_setting) -> str | None:
        """``problem`` with each setting written by ``name(setting, value)``."""
        return None if self.problem_template is None else render(self.problem_template, self.settings, name)


class NumericalError(Advises, RuntimeError):
    """A numerical failure (indefinite matrix, NaN bound) with advice on what to try; ``settings``:
    the fit settings the advice names by placeholders (:class:`Advises`)."""

    def __init__(self, message: str = "", *, settings=()):
        self.template, self.settings = str(message), tuple(settings)
        super().__init__(self.render())


class DistributedError(RuntimeError):
    """A collective operation across ranks failed: another rank stopped, or did not answer in time."""


class AdviceWarning(Advises, UserWarning):
    """A warning whose message names the fit settings it advises on by placeholders (:class:`Advises`):
    ``warnings.warn(ConvergenceWarning("... Try a larger {max_iter}.", settings=("max_iter",)))``."""

    def __init__(self, message: str = "", *, settings=()):
        self.template, self.settings = str(message), tuple(settings)
        super().__init__(self.render())


class ConvergenceWarning(AdviceWarning):
    """An iterative fit stopped before its convergence rule was met, or had to shrink its steps;
    the message says which setting to change (``settings``)."""


class OverconfidenceWarning(AdviceWarning):
    """A fit predicts with far more certainty than its data support: a refit without some of the labels
    scored them worse than a coin (:mod:`crowdzoo.diagnostics.confidence`); the message says what to try."""


class DataWarning(UserWarning):
    """Input data that is valid but will likely give a poor or misleading fit (a constant or
    duplicated feature column, items that share a feature vector); the message names the columns or
    ids and says what to change. ``arg``: the API argument it is about (``"item_features"``), which the
    message begins with (``"item_features: ..."``), for callers that name it in their own words."""

    def __init__(self, message: str = "", *, arg: str | None = None):
        super().__init__(message)
        self.arg = arg


class CollapseWarning(AdviceWarning):
    """A clustering fit ended with fewer clusters in use than it was given (clusters emptied or merged), or
    with a bound that fell well below its best during the fit; the message says what to try."""


def _show(x) -> str:
    """repr of a value as the user wrote it (numpy scalars shown as plain Python values), for an error
    message."""
    import numpy as np  # here, not at the top: ``import crowdzoo`` reads this module and stays light

    return repr(x.item() if isinstance(x, np.generic) else x)
