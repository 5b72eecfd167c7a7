//go:build !refalloc_check

package impl

const checks = false

func (c *Cache) checkHit(*sbEntry)           {}
func (c *Cache) hitMismatch(*sbEntry) string { return "" }
func (c *Cache) checkLead(int)               {}
func (c *Cache) leadMismatch(int) string     { return "" }
