"""The campaign room: one :class:`~lawlab_agent.campaigns.scheduler.CampaignScheduler`
holds every campaign's queue, leases, deadlines and the one retry policy;
workers lease trial attempts from it, whether they run in this process
(:mod:`~lawlab_agent.campaigns.local`), as local processes or as Kubernetes Jobs
(:mod:`lawlab_agent.launchers`). Grids and summaries: :mod:`lawlab_agent.campaigns.grid`.
"""
