"""The agent mailbox: queued and steering FIFOs with a single-driver wake-up."""

from __future__ import annotations

from ._mailbox import Mailbox, MailboxItem, MailboxStatistics, Ticket

__all__ = ["Mailbox", "MailboxItem", "MailboxStatistics", "Ticket"]
