package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/paymentsd/paymentsd/internal/api"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// usersCreateCmd creates a user and prints its API key once: only the key's
// hash is stored.
func usersCreateCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("users create")
	email := fs.String("email", "", "the new user's email address `E` (required)")
	args, err := parseArgs(fs, args)
	switch {
	case err != nil:
		return err
	case *email == "":
		return usageErrorf("--email is required")
	case !strings.Contains(*email, "@"):
		return usageErrorf("--email must be an email address, got %q", *email)
	}
	if err := noMoreArgs(args); err != nil {
		return err
	}
	pool, err := connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()

	key := api.NewAPIKey()
	user, err := dbsqlc.New().UserInsert(ctx, pool, &dbsqlc.UserInsertParams{Email: *email, ApiKeyHash: api.HashAPIKey(key)})
	if err != nil {
		if db.IsUniqueViolation(err, "users_email_key") {
			return fmt.Errorf("a user with email %s exists already", *email)
		}
		return fmt.Errorf("error creating user: %w", err)
	}
	return json.NewEncoder(stdout).Encode(struct {
		UserID int64  `json:"user_id"`
		Email  string `json:"email"`
		APIKey string `json:"api_key"`
	}{user.ID, user.Email, key})
}
