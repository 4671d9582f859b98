"""The process-failure flow (PROCESS notifications). To be written."""


def process_failure(env, notification):
    raise NotImplementedError
