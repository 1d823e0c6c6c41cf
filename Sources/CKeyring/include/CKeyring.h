#ifndef LOGINKIT_CKEYRING_H
#define LOGINKIT_CKEYRING_H

// The OS keyrings LoginKit keeps a store's sealing key in (docs/storage.md):
// - the kernel key retention service, through the keyctl(2)/add_key(2) system calls (no library);
// - the freedesktop Secret Service, through libsecret loaded with dlopen at the first use, so that a
//   program linking LoginKit starts, and falls back, on a machine without libsecret.
// Every function here may block (D-Bus): the Swift side calls them on a thread of its own.

#include <stddef.h>

// MARK: Kernel key retention service. Each returns >= 0 on success, -errno on failure.

/// The serial of the caller's persistent keyring (keyctl KEYCTL_GET_PERSISTENT), linked into the
/// process keyring so that its keys are possessed (readable) by this process.
long loginkit_keyctl_persistent_keyring(void);
/// The serial of the `user` key named `description` in `keyring`, or -ENOKEY.
long loginkit_keyctl_search(long keyring, const char *description);
/// Reads key `key` into `buffer` (at most `length` bytes); returns the key's full length.
long loginkit_keyctl_read(long key, void *buffer, size_t length);
/// Adds (or replaces) the `user` key `description` with `payload` in `keyring`; returns its serial.
long loginkit_keyctl_add(const char *description, const void *payload, size_t length, long keyring);
/// Invalidates key `key` (removed from every keyring at once).
long loginkit_keyctl_invalidate(long key);

// MARK: Secret Service (libsecret, loaded at run time).

/// What a Secret Service call ended with.
enum {
    LOGINKIT_SECRET_OK = 0,
    LOGINKIT_SECRET_NOT_FOUND = 1,        // no item with these attributes
    LOGINKIT_SECRET_LOCKED = 2,           // the item or the default collection is locked
    LOGINKIT_SECRET_UNAVAILABLE = 3,      // no service on the bus, a D-Bus failure, no default collection
    LOGINKIT_SECRET_CANCELLED = 4,        // cancelled (the caller's time limit)
};

/// An operation's cancellation handle (a GCancellable): cancel it from any thread.
typedef struct loginkit_secret_operation loginkit_secret_operation;

/// A new handle, or NULL when libsecret cannot be loaded (`error` then says why).
loginkit_secret_operation *loginkit_secret_operation_new(char **error);
/// Cancels the operation under way with this handle (thread-safe; may be called at any time).
void loginkit_secret_operation_cancel(loginkit_secret_operation *operation);
/// Releases the handle (after the operation returned).
void loginkit_secret_operation_free(loginkit_secret_operation *operation);

/// Connects to the service, checks that the default collection exists and is unlocked, and names
/// the program serving it (`provider`, e.g. "gnome-keyring-d" from /proc/PID/comm).
int loginkit_secret_probe(loginkit_secret_operation *operation, char **provider, char **error);
/// The secret of the LoginKit store key item `key_id`, never prompting: a locked item is
/// LOGINKIT_SECRET_LOCKED.
int loginkit_secret_lookup(loginkit_secret_operation *operation, const char *key_id, char **secret, char **error);
/// Stores `secret` as the LoginKit store key item `key_id` in the default collection, replacing
/// one with the same id; a locked collection is LOGINKIT_SECRET_LOCKED (no prompt).
int loginkit_secret_store(loginkit_secret_operation *operation, const char *key_id, const char *label, const char *secret, char **error);
/// Removes the LoginKit store key item `key_id` (absent is not an error).
int loginkit_secret_clear(loginkit_secret_operation *operation, const char *key_id, char **error);

/// Frees a string these functions returned, zeroing it first (it may be a secret).
void loginkit_secret_string_free(char *string);

#endif
