// Package quotas is the quotas: section of a region's configuration: what
// each tenant may ask of the region (submit rate, backlog, schedules) and
// the batch caps, with their validation. Package config embeds it.
package quotas
