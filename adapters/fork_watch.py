"""Imported first by the fork server of `adapters.pool`: the server exits once the process that started
it is gone, from its first moment (its framework imports take seconds; a command killed meanwhile
must not leave it behind, nor the runs it would fork)."""

from adapters.parent_watch import exit_when_starter_dies

exit_when_starter_dies()
