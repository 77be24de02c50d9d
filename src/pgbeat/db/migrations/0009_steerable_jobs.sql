-- Jobs steered while they run: the attempts history records snoozes and runs that ended
-- cancelled (a cancel of the running job, or a superseded run that would have retried or
-- been released) as what they are.

ALTER TABLE pgbeat_job_attempts DROP CONSTRAINT IF EXISTS pgbeat_job_attempts_outcome_check;
ALTER TABLE pgbeat_job_attempts ADD CONSTRAINT pgbeat_job_attempts_outcome_check
    CHECK (outcome IN ('retry', 'failed', 'released', 'snoozed', 'cancelled'));
