"""The event log of one live run, in the run-record schema the scorer reads."""

from sabot.trace import Event, EventKind, RunRecord


class Recorder:
    """Appends events with consecutive seq numbers; notes where the fault landed."""

    def __init__(self):
        self.events: list[Event] = []
        self.injection_seq: int | None = None

    def record(self, agent: str, kind: EventKind, **payload) -> int:
        seq = len(self.events) + 1
        # Stored as the plain string the reference schema holds; a kind not in EventKind is refused here.
        self.events.append(Event(seq, agent, str(EventKind(kind)), payload))
        if payload.get("injected") and self.injection_seq is None:
            self.injection_seq = seq
        return seq

    def record_of(
        self, *, run_id, framework, config, task, operator, seed, injection_verified, task_passed, error, extra
    ) -> RunRecord:
        return RunRecord(
            run_id=run_id,
            framework=framework,
            config=config,
            task=task,
            operator=operator,
            seed=seed,
            events=tuple(self.events),
            injection_seq=self.injection_seq,
            injection_verified=injection_verified,
            task_passed=task_passed,
            error=error,
            extra=extra,
        )
