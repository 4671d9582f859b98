"""The instance-failure flow (VM notifications). To be written."""


def restart_instance(env, store, notification):
    raise NotImplementedError
