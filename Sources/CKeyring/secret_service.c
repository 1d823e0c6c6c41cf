#define _GNU_SOURCE
#include "CKeyring.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// libsecret and GLib are loaded with dlopen on first use: LoginKit builds without their headers and
// a program using it starts (and falls back to another key provider) where they are missing. The
// few types used are spelled out here; they are GLib's and libsecret's stable public ABI.

typedef int gboolean;
typedef unsigned long GType;
typedef unsigned int GQuark;
typedef struct { GQuark domain; int code; char *message; } GError;
typedef struct GList { void *data; struct GList *next; struct GList *prev; } GList;
typedef unsigned int (*GHashFunc)(const void *);
typedef gboolean (*GEqualFunc)(const void *, const void *);

typedef struct { const char *name; int type; } SecretSchemaAttribute;
typedef struct {
    const char *name;
    int flags;
    SecretSchemaAttribute attributes[32];
    int reserved;
    void *reserved1, *reserved2, *reserved3, *reserved4, *reserved5, *reserved6, *reserved7;
} SecretSchema;

enum { SECRET_SERVICE_OPEN_SESSION = 1 << 1, SECRET_SEARCH_LOAD_SECRETS = 1 << 3 };

/// The item type of a LoginKit store key: attributes `application` ("loginkit") and `key-id`.
static const SecretSchema loginkit_schema = {
    "org.loginkit.StoreKey", 0, { { "application", 0 }, { "key-id", 0 }, { NULL, 0 } }, 0,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

static struct {
    void *(*hash_table_new)(GHashFunc, GEqualFunc);
    gboolean (*hash_table_insert)(void *, void *, void *);
    void (*hash_table_unref)(void *);
    GHashFunc str_hash;
    GEqualFunc str_equal;
    void (*error_free)(GError *);
    void (*list_free)(GList *);
    void (*object_unref)(void *);
    void *(*cancellable_new)(void);
    void (*cancellable_cancel)(void *);
    gboolean (*cancellable_is_cancelled)(void *);
    void *(*dbus_proxy_get_connection)(void *);
    void *(*bus_get_sync)(int, void *, GError **);
    void (*dbus_connection_set_exit_on_close)(void *, gboolean);
    void *(*dbus_connection_call_sync)(void *, const char *, const char *, const char *, const char *, void *, const void *, int, int, void *, GError **);
    void *(*variant_new)(const char *, ...);
    void (*variant_get)(void *, const char *, ...);
    void (*variant_unref)(void *);
    GType (*service_get_type)(void);
    void *(*service_open_sync)(GType, const char *, int, void *, GError **);
    GList *(*service_search_sync)(void *, const SecretSchema *, void *, int, void *, GError **);
    gboolean (*service_store_sync)(void *, const SecretSchema *, void *, const char *, const char *, void *, void *, GError **);
    gboolean (*service_clear_sync)(void *, const SecretSchema *, void *, void *, GError **);
    void *(*collection_for_alias_sync)(void *, const char *, int, void *, GError **);
    gboolean (*collection_get_locked)(void *);
    gboolean (*item_get_locked)(void *);
    void *(*item_get_secret)(void *);
    void *(*value_new)(const char *, long, const char *);
    const char *(*value_get_text)(void *);
    void (*value_unref)(void *);
} lib;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256];
static int loaded;

static void *open_library(const char *name) {
    void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!handle && !load_error[0]) snprintf(load_error, sizeof load_error, "%s could not be loaded (install libsecret-1-0)", name);
    return handle;
}

static void *symbol(void *handle, const char *name, int *missing) {
    void *address = handle ? dlsym(handle, name) : NULL;
    if (!address) {
        if (!load_error[0]) snprintf(load_error, sizeof load_error, "libsecret or GLib lacks %s", name);
        *missing = 1;
    }
    return address;
}

static void load(void) {
    void *secret = open_library("libsecret-1.so.0");
    void *glib = open_library("libglib-2.0.so.0");
    void *gobject = open_library("libgobject-2.0.so.0");
    void *gio = open_library("libgio-2.0.so.0");
    if (!secret || !glib || !gobject || !gio) return;
    int missing = 0;
#define LOAD(field, handle, name) *(void **)(&lib.field) = symbol(handle, name, &missing)
    LOAD(hash_table_new, glib, "g_hash_table_new");
    LOAD(hash_table_insert, glib, "g_hash_table_insert");
    LOAD(hash_table_unref, glib, "g_hash_table_unref");
    LOAD(str_hash, glib, "g_str_hash");
    LOAD(str_equal, glib, "g_str_equal");
    LOAD(error_free, glib, "g_error_free");
    LOAD(list_free, glib, "g_list_free");
    LOAD(variant_new, glib, "g_variant_new");
    LOAD(variant_get, glib, "g_variant_get");
    LOAD(variant_unref, glib, "g_variant_unref");
    LOAD(object_unref, gobject, "g_object_unref");
    LOAD(cancellable_new, gio, "g_cancellable_new");
    LOAD(cancellable_cancel, gio, "g_cancellable_cancel");
    LOAD(cancellable_is_cancelled, gio, "g_cancellable_is_cancelled");
    LOAD(dbus_proxy_get_connection, gio, "g_dbus_proxy_get_connection");
    LOAD(bus_get_sync, gio, "g_bus_get_sync");
    LOAD(dbus_connection_set_exit_on_close, gio, "g_dbus_connection_set_exit_on_close");
    LOAD(dbus_connection_call_sync, gio, "g_dbus_connection_call_sync");
    LOAD(service_get_type, secret, "secret_service_get_type");
    LOAD(service_open_sync, secret, "secret_service_open_sync");
    LOAD(service_search_sync, secret, "secret_service_search_sync");
    LOAD(service_store_sync, secret, "secret_service_store_sync");
    LOAD(service_clear_sync, secret, "secret_service_clear_sync");
    LOAD(collection_for_alias_sync, secret, "secret_collection_for_alias_sync");
    LOAD(collection_get_locked, secret, "secret_collection_get_locked");
    LOAD(item_get_locked, secret, "secret_item_get_locked");
    LOAD(item_get_secret, secret, "secret_item_get_secret");
    LOAD(value_new, secret, "secret_value_new");
    LOAD(value_get_text, secret, "secret_value_get_text");
    LOAD(value_unref, secret, "secret_value_unref");
#undef LOAD
    loaded = !missing;
}

struct loginkit_secret_operation {
    void *cancellable;
    /// The session-bus connection, held until the operation is freed: GLib keeps its shared
    /// connection only while someone holds it, and libsecret's service must get this one (with
    /// exit-on-close off), not a new one.
    void *bus;
};

static char *copy(const char *text) {
    return strdup(text ? text : "");
}

loginkit_secret_operation *loginkit_secret_operation_new(char **error) {
    pthread_once(&load_once, load);
    if (!loaded) {
        if (error) *error = copy(load_error[0] ? load_error : "libsecret could not be loaded");
        return NULL;
    }
    loginkit_secret_operation *operation = calloc(1, sizeof *operation);
    if (!operation) return NULL;
    operation->cancellable = lib.cancellable_new();
    return operation;
}

void loginkit_secret_operation_cancel(loginkit_secret_operation *operation) {
    if (operation && operation->cancellable) lib.cancellable_cancel(operation->cancellable);
}

void loginkit_secret_operation_free(loginkit_secret_operation *operation) {
    if (!operation) return;
    if (operation->bus) lib.object_unref(operation->bus);
    if (operation->cancellable) lib.object_unref(operation->cancellable);
    free(operation);
}

void loginkit_secret_string_free(char *string) {
    if (!string) return;
    explicit_bzero(string, strlen(string));
    free(string);
}

/// A failure's status and message; `fallback` when GLib gave no error.
static int failure(loginkit_secret_operation *operation, GError *gerror, int status, const char *fallback, char **error) {
    if (operation->cancellable && lib.cancellable_is_cancelled(operation->cancellable)) status = LOGINKIT_SECRET_CANCELLED;
    if (error) *error = copy(gerror && gerror->message ? gerror->message : fallback);
    if (gerror) lib.error_free(gerror);
    return status;
}

static void *open_service(loginkit_secret_operation *operation, int *status, char **error) {
    GError *gerror = NULL;
    // GLib's shared session-bus connection (which libsecret uses) sends the whole process SIGTERM
    // when the bus goes away, unless told otherwise: a library must not do that to its host.
    void *bus = lib.bus_get_sync(2 /* G_BUS_TYPE_SESSION */, operation->cancellable, &gerror);
    if (!bus) {
        *status = failure(operation, gerror, LOGINKIT_SECRET_UNAVAILABLE, "no D-Bus session bus", error);
        return NULL;
    }
    lib.dbus_connection_set_exit_on_close(bus, 0);
    if (operation->bus) lib.object_unref(operation->bus);
    operation->bus = bus;  // released with the operation, after the service
    // A service of our own (not libsecret's shared one), so that a daemon that went away and came
    // back is met afresh by the next operation.
    void *service = lib.service_open_sync(lib.service_get_type(), NULL, SECRET_SERVICE_OPEN_SESSION, operation->cancellable, &gerror);
    if (!service) *status = failure(operation, gerror, LOGINKIT_SECRET_UNAVAILABLE, "no Secret Service on the session bus", error);
    else if (gerror) lib.error_free(gerror);
    return service;
}

static void *attributes(const char *key_id) {
    void *table = lib.hash_table_new(lib.str_hash, lib.str_equal);
    lib.hash_table_insert(table, (void *)"application", (void *)"loginkit");
    lib.hash_table_insert(table, (void *)"key-id", (void *)key_id);
    return table;
}

/// The default collection's state: OK (unlocked), LOCKED, or UNAVAILABLE (none).
static int default_collection(loginkit_secret_operation *operation, void *service, char **error) {
    GError *gerror = NULL;
    void *collection = lib.collection_for_alias_sync(service, "default", 0, operation->cancellable, &gerror);
    if (!collection) {
        return failure(operation, gerror, LOGINKIT_SECRET_UNAVAILABLE,
                       "the Secret Service has no default collection (creating one needs a desktop prompt)", error);
    }
    int status = lib.collection_get_locked(collection) ? LOGINKIT_SECRET_LOCKED : LOGINKIT_SECRET_OK;
    if (status == LOGINKIT_SECRET_LOCKED && error) *error = copy("the default collection is locked");
    lib.object_unref(collection);
    return status;
}

int loginkit_secret_probe(loginkit_secret_operation *operation, char **provider, char **error) {
    int status = LOGINKIT_SECRET_OK;
    void *service = open_service(operation, &status, error);
    if (!service) return status;
    status = default_collection(operation, service, error);
    if (provider) {
        // Who serves org.freedesktop.secrets: its process's name, for `loginkit status`.
        *provider = NULL;
        void *connection = lib.dbus_proxy_get_connection(service);
        GError *gerror = NULL;
        void *reply = connection ? lib.dbus_connection_call_sync(
            connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
            "GetConnectionUnixProcessID", lib.variant_new("(s)", "org.freedesktop.secrets"), NULL, 0, 1000,
            operation->cancellable, &gerror) : NULL;
        if (reply) {
            unsigned int pid = 0;
            lib.variant_get(reply, "(u)", &pid);
            lib.variant_unref(reply);
            char path[64], name[64] = {0};
            snprintf(path, sizeof path, "/proc/%u/comm", pid);
            FILE *file = fopen(path, "re");
            if (file) {
                if (fgets(name, sizeof name, file)) name[strcspn(name, "\n")] = 0;
                fclose(file);
            }
            if (name[0]) *provider = copy(name);
        }
        if (gerror) lib.error_free(gerror);
    }
    lib.object_unref(service);
    return status;
}

int loginkit_secret_lookup(loginkit_secret_operation *operation, const char *key_id, char **secret, char **error) {
    int status = LOGINKIT_SECRET_OK;
    *secret = NULL;
    void *service = open_service(operation, &status, error);
    if (!service) return status;
    void *table = attributes(key_id);
    GError *gerror = NULL;
    // No SECRET_SEARCH_UNLOCK: a locked item is reported, never unlocked with a prompt.
    GList *items = lib.service_search_sync(service, &loginkit_schema, table, SECRET_SEARCH_LOAD_SECRETS, operation->cancellable, &gerror);
    lib.hash_table_unref(table);
    if (gerror) {
        status = failure(operation, gerror, LOGINKIT_SECRET_UNAVAILABLE, "the search failed", error);
    } else if (!items) {
        // "Not found" only from a service that could have shown it: a locked or missing default
        // collection (a locked KeePassXC database shows no items) is not a lost key.
        status = default_collection(operation, service, error);
        if (status == LOGINKIT_SECRET_OK) status = LOGINKIT_SECRET_NOT_FOUND;
    } else {
        void *item = items->data;
        void *value = lib.item_get_locked(item) ? NULL : lib.item_get_secret(item);
        if (!value) {
            status = LOGINKIT_SECRET_LOCKED;
            if (error) *error = copy("the key's item is locked");
        } else {
            const char *text = lib.value_get_text(value);
            if (text) {
                *secret = copy(text);
            } else {
                status = LOGINKIT_SECRET_UNAVAILABLE;
                if (error) *error = copy("the key's item does not hold text (not a LoginKit key)");
            }
            lib.value_unref(value);
        }
        for (GList *entry = items; entry; entry = entry->next) lib.object_unref(entry->data);
        lib.list_free(items);
    }
    lib.object_unref(service);
    return status;
}

int loginkit_secret_store(loginkit_secret_operation *operation, const char *key_id, const char *label, const char *secret, char **error) {
    int status = LOGINKIT_SECRET_OK;
    void *service = open_service(operation, &status, error);
    if (!service) return status;
    // Storing into a locked collection would ask the service to prompt: refused before.
    status = default_collection(operation, service, error);
    if (status == LOGINKIT_SECRET_OK) {
        void *table = attributes(key_id);
        void *value = lib.value_new(secret, -1, "text/plain");
        GError *gerror = NULL;
        if (!lib.service_store_sync(service, &loginkit_schema, table, "default", label, value, operation->cancellable, &gerror)) {
            status = failure(operation, gerror, LOGINKIT_SECRET_UNAVAILABLE, "the item could not be stored", error);
        } else if (gerror) {
            lib.error_free(gerror);
        }
        lib.value_unref(value);
        lib.hash_table_unref(table);
    }
    lib.object_unref(service);
    return status;
}

int loginkit_secret_clear(loginkit_secret_operation *operation, const char *key_id, char **error) {
    int status = LOGINKIT_SECRET_OK;
    void *service = open_service(operation, &status, error);
    if (!service) return status;
    void *table = attributes(key_id);
    GError *gerror = NULL;
    // FALSE without an error: nothing matched, which is what was wanted.
    if (!lib.service_clear_sync(service, &loginkit_schema, table, operation->cancellable, &gerror) && gerror) {
        status = failure(operation, gerror, LOGINKIT_SECRET_UNAVAILABLE, "the item could not be removed", error);
    }
    lib.hash_table_unref(table);
    lib.object_unref(service);
    return status;
}
