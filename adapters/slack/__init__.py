"""Quorum on Slack: ``app`` (Bolt listeners, the thread reply), ``render`` (mrkdwn and
Block Kit within Slack's limits)."""
