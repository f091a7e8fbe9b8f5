package core

import (
	"context"
	"fmt"

	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/store"
)

// keepItems is where the providers' answers are kept by version before
// they are served: the store's, when it keeps them (store.CatalogVersions).
func (c *Core) keepItems() resolve.KeepFunc {
	cv, ok := c.store.(store.CatalogVersions)
	if !ok {
		return nil
	}
	return cv.PutCatalogVersion
}

// StoredItems returns the index of a provider's answer the store keeps
// under version (store.CatalogVersions): one a decision names in its
// sources. false when the store keeps none under it, or keeps no answers.
func (c *Core) StoredItems(ctx context.Context, version string) (*resolve.Index, bool, error) {
	cv, ok := c.store.(store.CatalogVersions)
	if !ok || version == "" {
		return nil, false, nil
	}
	body, ok, err := cv.CatalogVersion(ctx, version)
	if err != nil || !ok {
		return nil, false, err
	}
	ix, err := resolve.StoredIndex(version, body)
	if err != nil {
		return nil, false, fmt.Errorf("core: %w", err)
	}
	return ix, true, nil
}
