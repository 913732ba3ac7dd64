"""What each job ran: recorded by its node, reported by its interpreter; shown and diffed."""
